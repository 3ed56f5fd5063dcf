// Package proxy is the agent's kube-proxy replacement: it loads the Service programs
// (package loader), watches Services, EndpointSlices and host-port pods, recompiles only the
// Services that changed (package services) and applies the result, resyncing the whole
// state periodically and after a repair. It also collects expired NodePort connections and
// serves the health-check node ports of externalTrafficPolicy Local Services.
package proxy
