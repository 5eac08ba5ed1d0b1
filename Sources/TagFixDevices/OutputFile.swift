import Foundation
public import TagFixSystem

/// Writing an output file (`--output FILE`) the way careful tools do, so that no path a user types
/// wrecks what is there:
/// - a regular file, or a new one, is written to a temporary file in the same folder, `fsync`ed
///   and renamed over it (keeping the old file's permission bits): a reader sees the old contents
///   or the new ones, never half, and a full disk leaves the old file as it was;
/// - `-`, `/dev/stdout` and `/dev/stderr` are the process's own descriptors, written in place;
/// - a FIFO or a character device (`/dev/null`, a terminal) is opened and written in place;
/// - a symlink is followed: its target is replaced as above and the link stays a link;
/// - anything else (a folder, a socket, a block device) is refused, and nothing is ever unlinked
///   but the temporary file.
public enum OutputFile {
    /// Writes `bytes` to `path` (see the type's rules).
    /// - Parameter newFileMode: a new file's permission bits, set before anything is written
    ///   (a secret's file: 0600); `nil`, 0666 less the umask. A file that is there keeps its own.
    /// - Throws: `OutputFileError` saying what failed and what to do.
    public static func write(_ bytes: [UInt8], to path: String, newFileMode: FilePermissions? = nil) throws(OutputFileError) {
        if let fd = standardDescriptor(path) {
            if let code = writeAll(fd, bytes) { throw OutputFileError(path: path, operation: "write", errno: code) }
            return
        }
        let status: Stat
        do {
            status = try Stat(path)
        } catch .noSuchFileOrDirectory {
            try replace(path: try resolved(path), with: bytes, mode: newFileMode, owner: nil)
            return
        } catch {
            throw OutputFileError(path: path, operation: "examine", code: error)
        }
        let kind = status.type
        if kind == .fifo || kind == .characterSpecial || path.hasPrefix("/dev/fd/") || path.hasPrefix("/proc/self/fd/") {
            try writeInPlace(bytes, to: path)
            return
        }
        guard kind == .regular else {
            throw OutputFileError(path: path, operation: "replace", code: kind == .directory ? .isDirectory : .invalidArgument)
        }
        try replace(path: try resolved(path), with: bytes, mode: status.permissions, owner: (status.userID, status.groupID))
    }

    /// Writes every byte to `fd`, retrying short writes and EINTR. Returns the errno of a failure.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Int32? {
        do {
            try FileDescriptor(rawValue: fd).writeAll(bytes)
            return nil
        } catch {
            return error.rawValue
        }
    }

    /// The descriptor `path` names for this process itself: `-` and `/dev/stdout` are 1,
    /// `/dev/stderr` is 2 (written in place: what the shell redirected them to is not replaced).
    static func standardDescriptor(_ path: String) -> Int32? {
        switch path {
        case "-", "/dev/stdout", "/proc/self/fd/1", "/dev/fd/1": FileDescriptor.standardOutput.rawValue
        case "/dev/stderr", "/proc/self/fd/2", "/dev/fd/2": FileDescriptor.standardError.rawValue
        default: nil
        }
    }

    private static func writeInPlace(_ bytes: [UInt8], to path: String) throws(OutputFileError) {
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(path, .writeOnly, options: .closeOnExec)
        } catch {
            throw OutputFileError(path: path, operation: "open", code: error)
        }
        do {
            _ = try fd.closeAfter { () throws(Errno) in try fd.writeAll(bytes) }
        } catch {
            throw OutputFileError(path: path, operation: "write", code: error)
        }
    }

    /// The file a path names once every symlink on its last component is followed (the target
    /// may not exist yet: a dangling link names the file to create).
    static func resolved(_ path: String) throws(OutputFileError) -> String {
        var current = path
        for _ in 0..<40 {
            guard let status = try? Stat(current, followTargetSymlink: false), status.type == .symbolicLink else { return current }
            let target: String
            do {
                target = try FileSystem.symbolicLinkTarget(current)
            } catch {
                throw OutputFileError(path: path, operation: "follow the link", code: error)
            }
            current = target.hasPrefix("/") ? target : folder(of: current) + "/" + target
        }
        throw OutputFileError(path: path, operation: "follow the link", code: .tooManySymbolicLinkLevels)
    }

    private static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let folder = String(path[..<slash])
        return folder.isEmpty ? "/" : folder
    }

    /// Writes a temporary file beside `path`, syncs it and renames it over `path`.
    private static func replace(path: String, with bytes: [UInt8], mode: FilePermissions?, owner: (UInt32, UInt32)?)
        throws(OutputFileError)
    {
        let folder = folder(of: path)
        let name = path.split(separator: "/").last.map(String.init) ?? "output"
        var temporary = ""
        var opened: Result<FileDescriptor, Errno> = .failure(.fileExists)
        for attempt in 0..<100 {
            temporary = "\(folder)/.\(name).\(getpid()).\(attempt).\(UInt32.random(in: 0...UInt32.max)).tmp"
            // 0o666 less the umask, like any new file; an existing file's bits are set below.
            opened = Result { () throws(Errno) in
                try FileDescriptor.open(
                    temporary, .writeOnly, options: [.create, .exclusiveCreate, .closeOnExec], permissions: FilePermissions(rawValue: 0o666)
                )
            }
            if case .failure(.fileExists) = opened { continue }
            break
        }
        let fd: FileDescriptor
        switch opened {
        case .success(let opened): fd = opened
        case .failure(let error): throw OutputFileError(path: path, operation: "create a file in the folder of", code: error)
        }
        func fail(_ operation: String, _ code: Errno) -> OutputFileError {
            _ = try? fd.close()
            _ = try? FileSystem.removeFile(temporary)
            return OutputFileError(path: path, operation: operation, code: code)
        }
        if let owner { _ = try? fd.setOwner(user: owner.0, group: owner.1) }  // as root; otherwise it stays ours
        if let mode {
            do { try fd.setPermissions(mode) } catch { throw fail("set the permissions of", error) }
        }
        do { try fd.writeAll(bytes) } catch { throw fail("write", error) }
        do { try fd.sync() } catch { throw fail("fsync", error) }
        do {
            try fd.close()
        } catch {
            _ = try? FileSystem.removeFile(temporary)
            throw OutputFileError(path: path, operation: "write", code: error)
        }
        do {
            try FileSystem.rename(temporary, to: path)
        } catch {
            _ = try? FileSystem.removeFile(temporary)
            throw OutputFileError(path: path, operation: "replace", code: error)
        }
        if let directory = try? FileDescriptor.open(folder, .readOnly, options: [.directory, .closeOnExec]) {
            try? directory.closeAfter { () throws(Errno) in try directory.sync() }
        }
    }
}

/// An output that could not be written; the file that was there is as it was.
public struct OutputFileError: Error, Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var operation: String
    /// What the system said.
    public var code: Errno

    /// `code`'s number.
    public var errno: Int32 {
        get { code.rawValue }
        set { code = Errno(rawValue: newValue) }
    }

    public init(path: String, operation: String, code: Errno) {
        self.path = path
        self.operation = operation
        self.code = code
    }

    public init(path: String, operation: String, errno: Int32) {
        self.init(path: path, operation: operation, code: Errno(rawValue: errno))
    }

    public var description: String {
        let hint: String
        switch code {
        case .noSpace, .diskQuotaExceeded: hint = "free some space, or write to another disk"
        case .permissionDenied, .notPermitted, .readOnlyFileSystem:
            hint = "check the file's and its folder's permissions, or write elsewhere"
        case .noSuchFileOrDirectory: hint = "create the folder first"
        case .isDirectory: hint = "give a file name, not a folder"
        case .invalidArgument: hint = "give a regular file, a FIFO or a character device"
        default: hint = "check the disk"
        }
        return "cannot \(operation) \(path) (\(code)): \(hint)"
    }
}
