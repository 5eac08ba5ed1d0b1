import Foundation

/// How tagfix-fuzz picks its target and replays inputs.
public enum FuzzEnvironment {
    public static let variable = "TAGFIX_FUZZ_TARGET"

    /// The target TAGFIX_FUZZ_TARGET names; stops the process with the list when it names none.
    public static func target() -> FuzzTarget {
        let name = ProcessInfo.processInfo.environment[variable] ?? ""
        guard let target = FuzzTarget(rawValue: name) else {
            FileHandle.standardError.write(Data("set \(variable) to one of: \(names)\n".utf8))
            exit(64)
        }
        return target
    }

    static var names: String { FuzzTarget.allCases.map(\.rawValue).joined(separator: " ") }

    /// `TARGET FILE…`: runs the target on each file (folders: each file in them). Returns the
    /// exit code: 0 when every input holds, 1 when one breaks an invariant, 64 for bad usage.
    public static func replay(_ arguments: [String]) -> Int32 {
        if arguments == ["--list"] {
            print(names)
            return 0
        }
        guard let name = arguments.first, let target = FuzzTarget(rawValue: name), arguments.count > 1 else {
            FileHandle.standardError.write(Data("usage: tagfix-fuzz TARGET FILE|FOLDER…   (targets: \(names))\n".utf8))
            return 64
        }
        var failures = 0
        var count = 0
        for path in arguments.dropFirst() {
            for file in files(path) {
                count += 1
                let bytes = Array(FileManager.default.contents(atPath: file) ?? Data())
                do {
                    try target.run(bytes)
                } catch {
                    failures += 1
                    print("\(file): \(error)")
                }
            }
        }
        print("\(name): \(count) inputs, \(failures) broke an invariant")
        return failures == 0 ? 0 : 1
    }

    static func files(_ path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return [] }
        guard isDirectory.boolValue else { return [path] }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        return names.sorted().map { (path as NSString).appendingPathComponent($0) }.filter {
            var folder: ObjCBool = false
            return FileManager.default.fileExists(atPath: $0, isDirectory: &folder) && !folder.boolValue
        }
    }
}
