import Foundation
public import TagFixCore

/// Files that hold keys. One that its group or others may read or write is refused before a
/// byte of it is read: the keys in it are every tag's keys. Errors name the file and the mode,
/// never what is in it.
public enum SecretFile {
    /// The text of the key file at `path`, after checking its mode (following a symlink, as
    /// `open` would).
    public static func read(_ path: String) throws(DataFileError) -> String {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw DataFileError(
                file: path, line: nil, message: "cannot read the key file (\(String(cString: strerror(errno))))", unreadable: true)
        }
        guard info.st_mode & 0o077 == 0 else {
            throw DataFileError(
                file: path, line: nil,
                message: "the key file can be read or written by others (mode \(String(info.st_mode & 0o777, radix: 8))); chmod 600 it",
                unreadable: true)
        }
        return try TextFile.read(path)
    }
}
