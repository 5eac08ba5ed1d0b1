import Foundation

/// A tag URL template (`tagfix enroll --write-url`): `{id}`, `{lat}`, `{lon}` and `{r}` are filled
/// in with the placement.
public struct URLTemplate: Sendable, Hashable {
    public static let placeholders = ["{id}", "{lat}", "{lon}", "{r}"]
    public var template: String

    public init(_ template: String) { self.template = template }

    /// The template filled in, checked to be a URL whose location (if it carries one) decodes back
    /// to this placement.
    public func render(id: String, at position: Coordinate, radius: Double) throws(URLTemplateError) -> String {
        let known = Self.placeholders
        var rest = template
        for key in known { rest = rest.replacingOccurrences(of: key, with: "") }
        if let brace = rest.firstIndex(where: { $0 == "{" || $0 == "}" }) {
            throw URLTemplateError("unknown placeholder near \"\(rest[brace...].prefix(12))\" (known: \(known.joined(separator: " ")))")
        }
        let url = template.replacingOccurrences(of: "{id}", with: id)
            .replacingOccurrences(of: "{lat}", with: Coordinate.format(position.latitude, 7))
            .replacingOccurrences(of: "{lon}", with: Coordinate.format(position.longitude, 7))
            .replacingOccurrences(of: "{r}", with: Coordinate.format(radius, 1))
        guard let parsed = URLComponents(string: url), parsed.scheme != nil else {
            throw URLTemplateError("\"\(url)\" is not a URL")
        }
        guard let location = try? URLLocation(url: url, defaultRadius: radius) else {
            throw URLTemplateError("\"\(url)\" carries a location tagfix cannot read back: check the template")
        }
        if template.contains("{id}"), location.tagID != id {
            throw URLTemplateError(
                "tagfix reads the tag id \"\(location.tagID ?? "none")\" from \"\(url)\", not \"\(id)\": put {id} in the last path segment or in ?id="
            )
        }
        if let region = location.region, template.contains("{lat}") {
            let off = Geodesic.distance(from: region.center, to: position)
            guard off < 0.05, abs(region.radius - radius) < 0.05 else {
                throw URLTemplateError("\"\(url)\" decodes to another place (\(Coordinate.format(off, 2)) m off): check the template")
            }
        }
        return url
    }
}

/// Why a URL template cannot be used, and what to check.
public struct URLTemplateError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) { self.description = description }
}
