import Glibc

/// System V shared memory, as far as TagFix touches it: a segment another program made (gpsd
/// exports its fixes in one) and leaves behind when it ends.
public enum SharedMemory {
    /// Removes the segment of `key` (`shmget` + `shmctl(IPC_RMID)`): it goes once nothing is
    /// attached to it. - Returns: whether there was one.
    @discardableResult
    public static func removeSegment(key: Int32) throws(Errno) -> Bool {
        let id: Int32
        do {
            id = try valueOrErrno { shmget(key_t(key), 0, 0) }
        } catch  where error == .noSuchFileOrDirectory {
            return false
        }
        try nothingOrErrno { shmctl(id, IPC_RMID, nil) }
        return true
    }

    /// Whether a segment of `key` exists.
    public static func segmentExists(key: Int32) -> Bool {
        (try? valueOrErrno { shmget(key_t(key), 0, 0) }) != nil
    }
}
