import Foundation

/// Where `verify --publish` (and `serve --publish`) keeps its outbox when no `--log` names one:
/// a session log in the state directory, one file per site and device, so that what a run could
/// not send goes with the next run on the same site and device, without the user having asked
/// for a log. The directory is, first that applies:
///
/// - `$STATE_DIRECTORY/outbox` (systemd's `StateDirectory=`: the service's own folder);
/// - `/var/lib/tagfix/outbox` as root;
/// - `$XDG_STATE_HOME/tagfix/outbox` (an absolute path), else `$HOME/.local/state/tagfix/outbox`
///   (the XDG Base Directory default).
///
/// The file is `SITE/DEVICE.jsonl` below it; a site or device that would name another folder
/// (`.`, `..`) has its dots percent-encoded, so every site and device has a file of its own
/// inside the outbox and no two share one.
public enum OutboxLocation {
    /// The outbox folder for this environment, or `nil` when none can be named (no HOME).
    public static func directory(environment: [String: String], isRoot: Bool) -> String? {
        if let state = environment["STATE_DIRECTORY"]?.split(separator: ":").first, state.hasPrefix("/") {
            return String(state) + "/outbox"
        }
        if isRoot { return "/var/lib/tagfix/outbox" }
        if let xdg = environment["XDG_STATE_HOME"], xdg.hasPrefix("/") { return xdg + "/tagfix/outbox" }
        if let home = environment["HOME"], home.hasPrefix("/") { return home + "/.local/state/tagfix/outbox" }
        return nil
    }

    /// The outbox of `site` and `device` (topic levels, checked by `FleetTopics`), or `nil`.
    public static func path(site: String, device: String, environment: [String: String], isRoot: Bool) -> String? {
        directory(environment: environment, isRoot: isRoot).map { "\($0)/\(component(site))/\(component(device)).jsonl" }
    }

    /// A topic level as one path component: `.` and `..` (and only they) cannot stand as they are.
    static func component(_ level: String) -> String {
        level.allSatisfy { $0 == "." } ? level.replacingOccurrences(of: ".", with: "%2E") : level
    }

    /// The process's own: its environment and whether it runs as root.
    public static func path(site: String, device: String) -> String? {
        path(site: site, device: device, environment: ProcessInfo.processInfo.environment, isRoot: geteuid() == 0)
    }

    /// Makes the outbox's folders (mode 0700: the verdicts are the site's, not every user's) and
    /// says whether the outbox is new.
    /// - Throws: `OutboxLocationError` with what to do, when a folder cannot be made.
    public static func prepare(_ path: String) throws(OutboxLocationError) -> Bool {
        let folder = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(
                atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw OutboxLocationError(folder: folder, reason: error.localizedDescription)
        }
        return !FileManager.default.fileExists(atPath: path)
    }
}

/// An outbox folder that cannot be made (a read-only or full disk, a file in the way).
public struct OutboxLocationError: Error, Sendable, CustomStringConvertible {
    public var folder: String
    public var reason: String
    public var description: String {
        "cannot make the outbox's folder \(folder) (\(reason)): name a session log with --log FILE, or set XDG_STATE_HOME to a writable folder"
    }
}
