package pgtest

// Shutdown stops the cluster this test binary started, if any. For TestMain
// functions that must run their own teardown too (an envtest control plane)
// and so cannot hand os.Exit to Main.
func Shutdown() {
	if cluster != nil {
		cluster.Stop()
		cluster = nil
	}
}
