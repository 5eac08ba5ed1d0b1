import Foundation

/// Why Leaflet could not be used.
public struct LeafletError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// Leaflet, the map library, as Debian's `libjs-leaflet` installs it (never a copy in TagFix's
/// tree): its script, its style sheet and its images. The one file the report module reads.
public struct Leaflet: Sendable {
    /// Where Debian's libjs-leaflet puts it.
    public static let debianDirectory = "/usr/share/javascript/leaflet"

    public var javascript: String
    public var css: String
    /// The style sheet's images by name (`layers.png`, `marker-icon.png`, …).
    public var images: [String: [UInt8]]
    public var version: String?

    public init(javascript: String, css: String, images: [String: [UInt8]] = [:]) {
        self.javascript = javascript
        self.css = css
        self.images = images
        version = Self.version(in: javascript)
    }

    /// Reads leaflet.min.js (else leaflet.js), leaflet.css and images/*.png from `directory`.
    /// - Throws: `LeafletError` naming the package to install.
    public static func load(directory: String = debianDirectory) throws(LeafletError) -> Leaflet {
        func read(_ name: String) -> Data? { FileManager.default.contents(atPath: directory + "/" + name) }
        guard let script = read("leaflet.min.js") ?? read("leaflet.js"), let style = read("leaflet.css") else {
            throw LeafletError(
                message:
                    "Leaflet is not installed (no \(directory)/leaflet.js or leaflet.css): apt-get install libjs-leaflet")
        }
        guard let javascript = String(data: script, encoding: .utf8), let css = String(data: style, encoding: .utf8) else {
            throw LeafletError(
                message:
                    "\(directory)/leaflet.js or leaflet.css is not UTF-8 text: reinstall it (apt-get install --reinstall libjs-leaflet)")
        }
        // Inlined into <script> and <style>: text that would end them early is refused.
        let lower = javascript.lowercased() + css.lowercased()
        guard !lower.contains("</script"), !lower.contains("</style"), !lower.contains("<!--") else {
            throw LeafletError(
                message:
                    "\(directory)/leaflet.js holds \"</script\", \"</style\" or \"<!--\": it cannot be inlined (reinstall libjs-leaflet)")
        }
        var images: [String: [UInt8]] = [:]
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory + "/images")) ?? []
        for name in names where name.hasSuffix(".png") && !name.contains("/") {
            if let data = read("images/" + name) { images[name] = Array(data) }
        }
        return Leaflet(javascript: javascript, css: css, images: images)
    }

    /// The style sheet with its images inlined as data: URIs (the report opens with nothing else).
    public var inlineCSS: String {
        var text = css
        for (name, bytes) in images {
            text = text.replacing("url(images/\(name))", with: "url(data:image/png;base64,\(Data(bytes).base64EncodedString()))")
        }
        return text
    }

    static func version(in javascript: String) -> String? {
        guard let range = javascript.range(of: #"version ?= ?"[0-9.]+""#, options: .regularExpression) else { return nil }
        return javascript[range].split(separator: "\"").dropFirst().first.map(String.init)
    }
}
