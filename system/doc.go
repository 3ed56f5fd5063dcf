// Package system is the one place that wires skiff: it turns what an operator asks for —
// the flags of `skiff server`, `skiff apiserver` and `skiff agent`, held here as plain
// structs with one set of defaults (defaults.go) — into the options of skiff's parts, runs
// the bootstrap step that writes every file they need (system/bootstrap), and then runs
// the parts under one supervisor (internal/supervisor). cmd/skiff only binds flags to these
// structs; every default, stated or derived (a node's address, image directories, the
// kubernetes Service's address, the server node's taint and role), is decided here, once.
//
// It stands above the control plane, the agent and the dataplane and is imported only by
// cmd/: nothing below it knows how the program is put together.
package system
