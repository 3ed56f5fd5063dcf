package nodeauth

import (
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// liveLookups counts the Authorizer's consistent reads of a node's pods after its informer
// missed, by what they found: "related" (the informer lagged a binding), "unrelated" (a
// refusal that would have stood anyway) or "error". On the API server's /metrics as
// skiff_node_authorizer_live_lookups_total; a growing "related" count says the informer
// falls behind.
var liveLookups = metrics.NewCounterVec(&metrics.CounterOpts{
	Namespace:      "skiff",
	Subsystem:      "node_authorizer",
	Name:           "live_lookups_total",
	Help:           "Consistent reads of a node's pods after the Node authorizer's informer found no relationship, by result.",
	StabilityLevel: metrics.ALPHA,
}, []string{"result"})

func init() { legacyregistry.MustRegister(liveLookups) }
