import Foundation
import TagFixDevices
import Testing

#if canImport(Glibc)
    import Glibc
#endif

private func folder() throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-output-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

private func status(_ path: String, follow: Bool = true) -> stat? {
    var result = stat()
    return (follow ? stat(path, &result) : lstat(path, &result)) == 0 ? result : nil
}

private func kind(_ path: String, follow: Bool = true) -> mode_t? { status(path, follow: follow).map { $0.st_mode & S_IFMT } }

private func contents(_ path: String) -> String? {
    FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
}

private let text = Array("id,lat,lon\nT01,53.5,-0.12\n".utf8)

@Suite("--output files: replaced atomically, devices and FIFOs written in place, symlinks followed")
struct OutputFileTests {
    @Test("a regular file is replaced by a new one with the same permission bits; no temporary file is left")
    func regularFile() throws {
        let dir = try folder()
        let path = dir + "/report.csv"
        try Data("old contents, longer than the new ones, to be gone entirely\n".utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o640)
        let before = try #require(status(path))
        try OutputFile.write(text, to: path)
        #expect(contents(path) == String(decoding: text, as: UTF8.self))
        let after = try #require(status(path))
        #expect(after.st_mode & 0o7777 == 0o640)
        #expect(after.st_ino != before.st_ino, "written in place, not renamed over")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["report.csv"])
    }

    @Test("a new file is created")
    func newFile() throws {
        let path = try folder() + "/new.csv"
        try OutputFile.write(text, to: path)
        #expect(contents(path) == String(decoding: text, as: UTF8.self))
        #expect(kind(path) == S_IFREG)
    }

    @Test("a symlink is followed: its target is replaced and the link stays a link", arguments: [true, false])
    func symlink(targetExists: Bool) throws {
        let dir = try folder()
        try FileManager.default.createDirectory(atPath: dir + "/real", withIntermediateDirectories: true)
        if targetExists { try Data("old\n".utf8).write(to: URL(fileURLWithPath: dir + "/real/site.csv")) }
        try FileManager.default.createSymbolicLink(atPath: dir + "/site.csv", withDestinationPath: "real/site.csv")
        try OutputFile.write(text, to: dir + "/site.csv")
        #expect(kind(dir + "/site.csv", follow: false) == S_IFLNK)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: dir + "/site.csv") == "real/site.csv")
        #expect(contents(dir + "/real/site.csv") == String(decoding: text, as: UTF8.self))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir + "/real") == ["site.csv"])
    }

    @Test("a FIFO is written in place: the reader gets the bytes and the FIFO stays a FIFO")
    func fifo() throws {
        let path = try folder() + "/pipe"
        #expect(mkfifo(path, 0o600) == 0)
        // The test holds the FIFO open for reading (O_RDWR: opening does not wait for a writer),
        // so the write does not wait for a reader; the bytes fit in the pipe's buffer.
        let reader = open(path, O_RDWR | O_NONBLOCK)
        #expect(reader >= 0)
        defer { close(reader) }
        try OutputFile.write(text, to: path)
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = read(reader, &buffer, buffer.count)
        #expect(Array(buffer.prefix(max(0, count))) == text)
        #expect(kind(path) == S_IFIFO)
    }

    @Test("/dev/null stays the character device it was")
    func devNull() throws {
        let before = try #require(status("/dev/null"))
        try OutputFile.write(text, to: "/dev/null")
        let after = try #require(status("/dev/null"))
        #expect(after.st_mode & S_IFMT == S_IFCHR)
        #expect(after.st_rdev == before.st_rdev)
        #expect(after.st_ino == before.st_ino)
    }

    @Test("-, /dev/stdout and /dev/stderr are the process's own descriptors, never a file to replace")
    func standardStreams() throws {
        let link = kind("/dev/stdout", follow: false)
        for path in ["-", "/dev/stdout", "/dev/stderr"] { try OutputFile.write([], to: path) }
        #expect(kind("/dev/stdout", follow: false) == link)
        #expect(!FileManager.default.fileExists(atPath: "-"))
    }

    @Test("a folder no file can be made in is an error that says so, and nothing is left behind")
    func readOnlyFolder() throws {
        // chmod does not stop root: there, /proc/self is a folder no file can be created in.
        let dir: String
        if geteuid() == 0 {
            dir = "/proc/self"
        } else {
            dir = try folder()
            chmod(dir, 0o555)
        }
        let before = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasPrefix(".") }
        #expect(
            performing: { try OutputFile.write(text, to: dir + "/out.csv") },
            throws: { error in (error as? OutputFileError)?.description.contains("out.csv") == true })
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasPrefix(".") } == before)
    }

    @Test("a folder given as the output is refused and left alone")
    func folderAsOutput() throws {
        let dir = try folder()
        #expect(
            performing: { try OutputFile.write(text, to: dir) },
            throws: { error in (error as? OutputFileError)?.description.contains("not a folder") == true })
        #expect(kind(dir) == S_IFDIR)
    }

    @Test("a full disk is an error that names it, and the old file is as it was")
    func fullDisk() throws {
        #expect(
            performing: { try OutputFile.write(text, to: "/dev/full") },
            throws: { error in (error as? OutputFileError)?.errno == ENOSPC })
    }
}
