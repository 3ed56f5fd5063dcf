package nodeauth

import (
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"
)

// UserPrefix starts the user name of every node: system:node:<name>.
const UserPrefix = "system:node:"

// NodeIdentity tells whether u is a node (in group system:nodes, with a user name starting
// system:node:) and, if so, its name. A node whose name is empty (user "system:node:") is a
// node all the same, but one that may reach nothing tied to a particular node.
func NodeIdentity(u user.Info) (name string, isNode bool) {
	if u == nil {
		return "", false
	}
	rest, ok := strings.CutPrefix(u.GetName(), UserPrefix)
	if !ok || !slices.Contains(u.GetGroups(), user.NodesGroup) {
		return "", false
	}
	return rest, true
}
