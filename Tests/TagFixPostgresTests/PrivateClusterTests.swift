import Foundation
import TagFixTestDaemons
import Testing

/// The private cluster is the tests' own, and so is everything it makes.
@Suite("a private PostgreSQL cluster leaves nothing behind", .enabled(if: PrivatePostgres.available, "needs PostgreSQL"))
struct PrivateClusterTests {
    @Test("its dynamic shared memory is in files of its own folder, not POSIX segments a killed cluster leaves in /dev/shm")
    func dynamicSharedMemoryInItsFolder() async throws {
        try await PrivatePostgres.with { server in
            // A parallel query's or the statistics' segments: the postmaster makes its control
            // segment at start, in pg_dynshmem with `mmap`.
            let folder = server.directory + "/data/pg_dynshmem"
            let segments = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            #expect(!segments.isEmpty, "no segment in \(folder): they went to /dev/shm, and a killed cluster leaves them there")
        }
    }
}
