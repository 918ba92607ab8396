import Foundation
import Testing
import TidingsTestSupport

/// `SpawnedProcess` (the PostgreSQL cluster's `pg_ctl`, the systemd manager) gives its child
/// standard input, output and error and nothing else of the test process: a descriptor the
/// test process holds without close-on-exec does not reach the child (a long-lived server that
/// kept one kept, among others, the socket by which Foundation's `Process` sees a child exit).
@Suite("Spawned processes")
struct SpawnedProcessTests {
    @Test func aChildGetsOnlyItsStandardDescriptors() throws {
        let leaked = open("/dev/null", O_RDONLY) // no O_CLOEXEC: posix_spawn would pass it on
        #expect(leaked > 2)
        defer { close(leaked) }
        // `ls` lists its own descriptors: 0–2, and the one it reads the directory with.
        let (status, output) = try SpawnedProcess.run(["/bin/ls", "/proc/self/fd"])
        #expect(status == 0, "\(output)")
        let descriptors = Set(output.split(whereSeparator: \.isNewline).compactMap { Int32($0) })
        #expect(!descriptors.contains(leaked), "the child has the test process's descriptor \(leaked): \(descriptors.sorted())")
        #expect(descriptors.isSubset(of: [0, 1, 2, 3]), "\(descriptors.sorted())")
    }
}
