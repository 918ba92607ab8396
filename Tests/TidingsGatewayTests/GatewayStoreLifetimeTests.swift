import Foundation
import Testing
import TidingsGateway
import TidingsSQLite
import TidingsTestSupport

/// What a stopped gateway leaves behind of its store.
@Suite struct GatewayStoreLifetimeTests {
    /// A gateway on SQLite closes its store when it stops: the WAL checkpointer's thread has
    /// ended when `stop` returns (before, it stayed parked until the store's deinit, which did
    /// not come while anything held the gateway), and once the gateway is let go, so is the store.
    @Test func aStoppedGatewayClosesItsSQLiteStore() async throws {
        weak var released: SQLiteGatewayStore?
        do {
            let h = try await GatewayHarness.start(store: .sqlite)
            defer { try? FileManager.default.removeItem(at: h.directory) }
            let store = try #require(h.gateway.store as? SQLiteGatewayStore)
            released = store
            #expect(store.checkpointerIsRunning)
            await h.stop()
            #expect(!store.checkpointerIsRunning)
        }
        #expect(released == nil, "the store outlived its gateway")
    }
}
