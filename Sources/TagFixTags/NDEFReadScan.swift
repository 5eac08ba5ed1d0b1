public import TagFixCore
import TagFixNDEF

extension NDEFRead {
    /// The scan a reader reports for this read of tag `uid`, started at `time` and lasting
    /// `duration`: the message's first URL, the problem when there is no message, and what the
    /// chip's originality signature says. `extraBytes` are bytes moved before the read (a write).
    public func scan(readerID: String, uid: TagUID, time: Timestamp, duration: Duration, extraBytes: Int = 0) -> TagScan {
        let parsed = message.flatMap { try? NDEFMessage(bytes: $0) }
        var scan = TagScan(
            readerID: readerID, uid: uid, tagType: tagType, url: parsed?.firstURL, time: time, ndefMessage: message,
            readDuration: duration, bytesMoved: bytesMoved + extraBytes)
        scan.ndefProblem = problem
        scan.ndefReadFailed = failed
        scan.originality = originality(uid: uid)
        return scan
    }
}
