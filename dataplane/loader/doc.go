// Package loader loads the socket-level and NodePort programs of a node, pins their maps and
// links under the node's pin directory, and attaches them (cgroup hooks, tcx on the uplink).
// Maps pinned by an earlier run are reused with their entries, and a pinned link is updated
// to the new program in place, so restarting the agent never leaves a moment without
// Service translation. Check says what an operator or a stray cleanup removed, and a second
// Load repairs it. The privileged tests here drive real traffic through the loaded programs.
package loader
