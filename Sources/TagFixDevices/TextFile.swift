import Foundation
public import TagFixCore

/// Reading the text files the tools take (registries, scenarios, logs).
public enum TextFile {
    /// Reads a UTF-8 text file.
    /// - Throws: `DataFileError` with `unreadable` set when the file is missing or not readable,
    ///   and a message that says which.
    public static func read(_ path: String) throws(DataFileError) -> String {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw DataFileError(file: path, line: nil, message: "no such file", unreadable: true)
        }
        guard !isDirectory.boolValue else {
            throw DataFileError(file: path, line: nil, message: "is a directory, not a file", unreadable: true)
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw DataFileError(file: path, line: nil, message: "cannot read the file (check its permissions)", unreadable: true)
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw DataFileError(file: path, line: nil, message: "the file is not UTF-8 text")
        }
        return text
    }
}
