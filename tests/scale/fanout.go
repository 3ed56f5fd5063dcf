package scale

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Fanout is the watch load of many node agents on the server, without their processes:
// each simulated agent holds what a real one does once it has synced — a watch of its own
// node's pods (a field selector), one of every Service and one of every EndpointSlice — and
// reads every byte. Watches start from a resource version read once, as agents that listed
// already would: the cost measured is the fan-out of changes, not a start-up storm of lists.
// The streams are read raw, not decoded: the harness shares the machine with the server, and
// decoding 3 × agents streams here would be the simulated agents' CPU, not the server's.
type Fanout struct {
	Agents, Streams int
	bytes           atomic.Int64
	broken          atomic.Int64

	mu     sync.Mutex
	probes map[string]map[int]time.Time // probe Service name → when each agent's Service stream first carried it
	stop   context.CancelFunc
	done   sync.WaitGroup
}

// fanoutProbe prefixes the Services whose delivery is timed.
const fanoutProbe = "fanout-probe-"

// StartFanout opens agents' watches (agent i is kwok node i's) and keeps them until Stop.
// A watch the server ends (its timeout) is reopened from the version current then.
func StartFanout(ctx context.Context, c kubernetes.Interface, agents int) (*Fanout, error) {
	ctx, cancel := context.WithCancel(ctx)
	f := &Fanout{Agents: agents, Streams: 3 * agents, probes: map[string]map[int]time.Time{}, stop: cancel}
	core, discovery := c.CoreV1().RESTClient(), c.DiscoveryV1().RESTClient()
	podsVersion := &sharedVersion{req: func() *rest.Request { return core.Get().Resource("pods") }}
	servicesVersion := &sharedVersion{req: func() *rest.Request { return core.Get().Resource("services") }}
	slicesVersion := &sharedVersion{req: func() *rest.Request { return discovery.Get().Resource("endpointslices") }}
	for i := 0; i < agents; i++ {
		node := fields.OneTermEqualSelector("spec.nodeName", NodeName(i)).String()
		f.follow(ctx, -1, podsVersion, func() *rest.Request {
			return core.Get().Resource("pods").Param("fieldSelector", node)
		})
		f.follow(ctx, i, servicesVersion, func() *rest.Request { return core.Get().Resource("services") })
		f.follow(ctx, -1, slicesVersion, func() *rest.Request { return discovery.Get().Resource("endpointslices") })
	}
	return f, nil
}

// sharedVersion is a resource's current version, read with a list of one object and shared by
// every agent's watch of it for a few seconds: the agents are synced ones, whose watches start
// from where they were, not thousands of start-up lists at once.
type sharedVersion struct {
	req func() *rest.Request

	mu      sync.Mutex
	version string
	read    time.Time
}

func (v *sharedVersion) get(ctx context.Context) (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.version != "" && time.Since(v.read) < 10*time.Second {
		return v.version, nil
	}
	var list struct {
		metav1.TypeMeta
		ListMeta metav1.ListMeta `json:"metadata"`
	}
	body, err := v.req().Param("limit", "1").SetHeader("Accept", "application/json").DoRaw(ctx)
	if err == nil {
		err = json.Unmarshal(body, &list)
	}
	if err != nil {
		return "", err
	}
	v.version, v.read = list.ListMeta.ResourceVersion, time.Now()
	return v.version, nil
}

// follow keeps one watch stream open, reading it raw; agent, if not -1, is whose Service
// stream it is, in which the probe Services' names are looked for.
func (f *Fanout) follow(ctx context.Context, agent int, version *sharedVersion, req func() *rest.Request) {
	f.done.Add(1)
	go func() {
		defer f.done.Done()
		buf := make([]byte, 32<<10)
		for ctx.Err() == nil {
			rv, err := version.get(ctx)
			var stream io.ReadCloser
			if err == nil {
				stream, err = req().Param("watch", "true").Param("resourceVersion", rv).
					Param("allowWatchBookmarks", "true").Stream(ctx)
			}
			if err != nil {
				f.broken.Add(1)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
			var tail []byte // the end of the last read: a name may straddle two
			for {
				n, err := stream.Read(buf)
				f.bytes.Add(int64(n))
				if agent >= 0 && n > 0 {
					f.spot(agent, append(tail, buf[:n]...))
					tail = append(tail[:0], buf[max(0, n-64):n]...)
				}
				if err != nil {
					break
				}
			}
			stream.Close()
		}
	}()
}

// spot notes the probe Services named in a chunk of an agent's Service stream.
func (f *Fanout) spot(agent int, chunk []byte) {
	for off := 0; ; {
		i := bytes.Index(chunk[off:], []byte(fanoutProbe))
		if i < 0 {
			return
		}
		start := off + i
		end := start + len(fanoutProbe)
		for end < len(chunk) && chunk[end] >= '0' && chunk[end] <= '9' {
			end++
		}
		name := string(chunk[start:end])
		at := time.Now()
		f.mu.Lock()
		if seen, ok := f.probes[name]; ok {
			if _, again := seen[agent]; !again {
				seen[agent] = at
			}
		}
		f.mu.Unlock()
		off = end
	}
}

// Delivery creates n probe Services in namespace and times each from its creation until
// every agent's Service watch has carried it: the p50/p99 over all (agent, Service)
// deliveries, and the slowest.
func (f *Fanout) Delivery(ctx context.Context, c kubernetes.Interface, namespace string, n int) (Latency, time.Duration, error) {
	var all []time.Duration
	var slowest time.Duration
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s%d", fanoutProbe, i)
		f.mu.Lock()
		f.probes[name] = map[int]time.Time{}
		f.mu.Unlock()
		start := time.Now()
		if _, err := c.CoreV1().Services(namespace).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
			return Latency{}, 0, err
		}
		if _, err := poll(ctx, 2*time.Minute, 10*time.Millisecond, fmt.Sprintf("%s delivered to %d agents", name, f.Agents), func() (bool, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return len(f.probes[name]) >= f.Agents, nil
		}); err != nil {
			return Latency{}, 0, err
		}
		f.mu.Lock()
		for _, at := range f.probes[name] {
			d := at.Sub(start)
			all = append(all, d)
			slowest = max(slowest, d)
		}
		delete(f.probes, name)
		f.mu.Unlock()
		_ = c.CoreV1().Services(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	}
	return latencyOf(all), slowest, nil
}

// Bytes is how much the agents' watches carried; Broken how many watches failed or were
// refused (each reopened).
func (f *Fanout) Bytes() int64  { return f.bytes.Load() }
func (f *Fanout) Broken() int64 { return f.broken.Load() }

// Stop closes every watch and waits for their readers.
func (f *Fanout) Stop() {
	f.stop()
	f.done.Wait()
}
