package version

import (
	"fmt"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	kubeversion "k8s.io/component-base/version"
)

// Kubernetes is the Kubernetes version this build serves and reports as its kubelet version
// ("v1.37.2+skiff"): the version skew between servers and agents is counted in it, as
// upstream counts it between kube-apiserver and kubelets.
func Kubernetes() string { return kubeversion.Get().GitVersion }

// MaxAgentLag is how many minor versions an agent may be older than its servers: upstream's
// version-skew policy lets a kubelet be up to three minors older than kube-apiserver (since
// 1.28), never newer.
const MaxAgentLag = 3

// CheckAgentSkew says why an agent at Kubernetes version agent may not run against a server
// at version server (nil when it may): not newer, at most MaxAgentLag minor versions older,
// the same major version.
func CheckAgentSkew(server, agent string) error {
	s, a, err := parsePair(server, agent)
	if err != nil {
		return err
	}
	switch {
	case s.Major() != a.Major():
		return fmt.Errorf("this agent is Kubernetes %s and its server %s: different major versions never work together", agent, server)
	case a.Minor() > s.Minor():
		return fmt.Errorf("this agent is Kubernetes %s, newer than its server (%s): upgrade the servers first, then the agents (an agent may never be newer than its servers)", agent, server)
	case s.Minor()-a.Minor() > MaxAgentLag:
		return fmt.Errorf("this agent is Kubernetes %s, %d minor versions older than its server (%s): at most %d are supported; upgrade the agent", agent, s.Minor()-a.Minor(), server, MaxAgentLag)
	}
	return nil
}

// CheckServerSkew says why a server at Kubernetes version joining may not join a cluster
// whose server answering it is at version running (nil when it may): the servers of one
// cluster are at most one minor version apart, as upstream's kube-apiservers in an HA
// control plane, which is what upgrading them one at a time needs.
func CheckServerSkew(running, joining string) error {
	r, j, err := parsePair(running, joining)
	if err != nil {
		return err
	}
	if r.Major() != j.Major() || max(r.Minor(), j.Minor())-min(r.Minor(), j.Minor()) > 1 {
		return fmt.Errorf("this server is Kubernetes %s and the cluster's server %s: servers of one cluster may be at most one minor version apart; upgrade one minor version at a time", joining, running)
	}
	return nil
}

func parsePair(a, b string) (*utilversion.Version, *utilversion.Version, error) {
	va, err := utilversion.ParseGeneric(a)
	if err != nil {
		return nil, nil, fmt.Errorf("version %q: %w", a, err)
	}
	vb, err := utilversion.ParseGeneric(b)
	if err != nil {
		return nil, nil, fmt.Errorf("version %q: %w", b, err)
	}
	return va, vb, nil
}

// Known says whether v is a release's Kubernetes version. A build made without the
// Makefile's version flags (go build, go run) reports v0.0.0-master: skew against it cannot
// be judged, and callers skip the check, saying so.
func Known(v string) bool {
	p, err := utilversion.ParseGeneric(v)
	return err == nil && p.Major() > 0
}
