import Foundation
public import TagFixCore
import TagFixSystem

/// Where `tagfix enroll` records a placement: checked before anything waits (the id is not taken
/// unless replacing; a new file's folder is writable), and created only when the placement is
/// recorded, so a failed enrolment leaves no registry behind.
public struct EnrolmentRegistry: Sendable {
    public let path: String
    private let opened: SQLiteRegistry?

    public init(path: String, id: String, replace: Bool) throws(EnrolmentRegistryError) {
        self.path = path
        guard FileManager.default.fileExists(atPath: path) else {
            let folder = (path as NSString).deletingLastPathComponent
            do throws(Errno) {
                try FileSystem.check(W_OK, of: folder.isEmpty ? "." : folder)
            } catch {
                throw .folderNotWritable(path, error.description)
            }
            opened = nil
            return
        }
        let store: SQLiteRegistry
        let existing: RegistryEntry?
        do throws(RegistryStoreError) {
            store = try SQLiteRegistry(path: path, mode: .readWrite)
            // The store's own error, so a locked registry is `.busy` here as everywhere else.
            existing = try store.storedEntry(withID: id)
        } catch {
            throw .store(error)
        }
        if !replace, existing != nil { throw .alreadyEnrolled(id: id, path: path) }
        opened = store
    }

    /// Adds (or with `replace`, replaces) the placement with the read health its enrolment
    /// measured, creating the file if it is new.
    public func record(_ entry: RegistryEntry, replace: Bool, readHealth: EnrolledReadHealth? = nil) throws(RegistryStoreError) {
        let store: SQLiteRegistry
        if let opened { store = opened } else { store = try SQLiteRegistry(path: path, mode: .create) }
        try store.add(entry, replace: replace, readHealth: readHealth)
    }
}

/// Why an enrolment cannot be recorded.
public enum EnrolmentRegistryError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The registry could not be used (locked, damaged, read-only…).
    case store(RegistryStoreError)
    /// The id is enrolled already, and replacing was not asked for.
    case alreadyEnrolled(id: String, path: String)
    /// A new registry's folder is missing or not writable.
    case folderNotWritable(String, String)

    public var description: String {
        switch self {
        case .store(let error): error.description
        case .alreadyEnrolled(let id, let path):
            "tag \"\(id)\" is already enrolled in \(path): pass --replace to enrol it again"
        case .folderNotWritable(let path, let reason):
            "cannot create the registry \(path): \(reason) (the folder must exist and be writable)"
        }
    }
}
