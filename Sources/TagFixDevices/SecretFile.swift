import Foundation
public import TagFixCore
import TagFixSystem

/// Files that hold keys. One that its group or others may read or write is refused before a
/// byte of it is read: the keys in it are every tag's keys. Errors name the file and the mode,
/// never what is in it.
public enum SecretFile {
    /// The text of the key file at `path`, after checking its mode (following a symlink, as
    /// `open` would).
    public static func read(_ path: String) throws(DataFileError) -> String {
        let info: Stat
        do {
            info = try Stat(path)
        } catch {
            throw DataFileError(file: path, line: nil, message: "cannot read it (\(error))", unreadable: true)
        }
        guard info.mode & 0o077 == 0 else {
            throw DataFileError(
                file: path, line: nil,
                message:
                    "it holds secrets and can be read or written by others (mode \(String(info.mode & 0o777, radix: 8))); chmod 600 it",
                unreadable: true)
        }
        return try TextFile.read(path)
    }

    /// Why a key file could not be created.
    public enum CreateError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The path exists: a key file is never replaced.
        case exists(String)
        case failed(String, String)

        public var description: String {
            switch self {
            case .exists(let path): "\(path) exists: tagfix never overwrites a key file; choose another name or move it away"
            case .failed(let path, let why): "cannot create \(path): \(why)"
            }
        }
    }

    /// Creates `path` (never replacing a file: O_EXCL) with `mode`, writes `text` and syncs it.
    public static func create(_ path: String, _ text: String, mode: UInt32) throws(CreateError) {
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(
                path, .writeOnly, options: [.create, .exclusiveCreate, .closeOnExec], permissions: FilePermissions(rawValue: mode))
        } catch {
            throw error == .fileExists ? .exists(path) : .failed(path, error.description)
        }
        defer { _ = try? fd.close() }
        // The umask may have taken bits away; never more than asked for.
        _ = try? fd.setPermissions(FilePermissions(rawValue: mode))
        do {
            try fd.writeAll(Array(text.utf8))
            try fd.sync()
        } catch {
            throw .failed(path, error.description)
        }
    }
}
