// Package netutil is the test image's one program, in the spirit of upstream's agnhost: with
// no arguments it serves HTTP on :8080 (/hostname, /clientip, /echo?msg=); its subcommands
// fetch a URL, connect to a TCP or UDP port, resolve a name, run TCP/UDP echo servers, serve
// admission and conversion webhooks, burn CPU, or sleep. End-to-end tests of pods, Services and policy run it inside pods.
package netutil

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Main runs the command line args (without the program name) and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, args, stdout); err != nil {
		fmt.Fprintln(stderr, "netutil:", err)
		return 1
	}
	return 0
}

const usage = `usage: netutil [serve [--port 8080]]
       netutil fetch URL [--source-port N]
       netutil connect HOST:PORT [--udp] [--timeout 5s]
       netutil hold HOST:PORT [INTERVAL]
       netutil dns NAME
       netutil echo [--port 7] [--udp]
       netutil cat FILE...
       netutil write FILE TEXT
       netutil fill FILE MEBIBYTES
       netutil tick [INTERVAL]
       netutil env NAME...
       netutil probe CIDR [--port 8080] [--for 10s]
       netutil sleep [DURATION]
       netutil burn MILLICORES
       netutil webhook CERT KEY [--port 8443]`

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		args = []string{"serve"}
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	port := fs.Int("port", 0, "port")
	udp := fs.Bool("udp", false, "use UDP")
	timeout := fs.Duration("timeout", 5*time.Second, "timeout")
	probeFor := fs.Duration("for", 10*time.Second, "how long to probe")
	sourcePort := fs.Int("source-port", 0, "local TCP port to fetch from")
	// Flags may come after positional arguments (netutil connect HOST:PORT --udp).
	valueFlags := map[string]bool{"port": true, "timeout": true, "for": true, "source-port": true}
	var pos, flags []string
	for i := 1; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		if name := strings.TrimLeft(a, "-"); valueFlags[name] && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if err := fs.Parse(flags); err != nil {
		return fmt.Errorf("%v\n%s", err, usage)
	}
	switch args[0] {
	case "serve":
		p := *port
		if p == 0 {
			p = 8080
		}
		fmt.Fprintf(out, "netutil serving HTTP on :%d\n", p)
		return Serve(ctx, fmt.Sprintf(":%d", p))
	case "fetch":
		if len(pos) != 1 {
			return errors.New(usage)
		}
		return FetchFrom(ctx, pos[0], *timeout, *sourcePort, out)
	case "connect":
		if len(pos) != 1 {
			return errors.New(usage)
		}
		return Connect(pos[0], *udp, *timeout, out)
	case "dns":
		if len(pos) != 1 {
			return errors.New(usage)
		}
		addrs, err := net.DefaultResolver.LookupHost(ctx, pos[0])
		if err != nil {
			return err
		}
		fmt.Fprintln(out, strings.Join(addrs, "\n"))
		return nil
	case "echo":
		p := *port
		if p == 0 {
			p = 7
		}
		return Echo(ctx, fmt.Sprintf(":%d", p), *udp)
	case "env":
		for _, name := range pos {
			fmt.Fprintln(out, os.Getenv(name))
		}
		return nil
	case "cat":
		for _, f := range pos {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			if _, err := out.Write(b); err != nil {
				return err
			}
		}
		return nil
	case "hold":
		// One TCP connection to an echo server, a line and its echo every INTERVAL (100ms)
		// until stopped: a flow that must outlive whatever happens to the network meanwhile.
		if len(pos) < 1 || len(pos) > 2 {
			return errors.New(usage)
		}
		d := 100 * time.Millisecond
		if len(pos) == 2 {
			var err error
			if d, err = time.ParseDuration(pos[1]); err != nil || d <= 0 {
				return fmt.Errorf("hold: %q is not a positive duration", pos[1])
			}
		}
		return Hold(ctx, pos[0], d, *timeout, out)
	case "tick":
		// Prints "tick N" every INTERVAL (1s) until stopped: output to attach to.
		d := time.Second
		if len(pos) == 1 {
			var err error
			if d, err = time.ParseDuration(pos[0]); err != nil || d <= 0 {
				return fmt.Errorf("tick: %q is not a positive duration", pos[0])
			}
		}
		t := time.NewTicker(d)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				fmt.Fprintf(out, "tick %d\n", n)
			}
		}
	case "write":
		// Writes TEXT to FILE, making its directory: how tests leave data in a volume.
		if len(pos) != 2 {
			return errors.New(usage)
		}
		if err := os.MkdirAll(filepath.Dir(pos[0]), 0o755); err != nil {
			return err
		}
		return os.WriteFile(pos[0], []byte(pos[1]), 0o644)
	case "probe":
		if len(pos) != 1 {
			return errors.New(usage)
		}
		prefix, err := netip.ParsePrefix(pos[0])
		if err != nil {
			return err
		}
		p := *port
		if p == 0 {
			p = 8080
		}
		return Probe(ctx, prefix, p, *probeFor, out)
	case "webhook":
		if len(pos) != 2 {
			return fmt.Errorf("webhook: CERT KEY\n%s", usage)
		}
		p := *port
		if p == 0 {
			p = 8443
		}
		return ServeWebhooks(ctx, fmt.Sprintf(":%d", p), pos[0], pos[1])
	case "burn":
		if len(pos) != 1 {
			return fmt.Errorf("burn: MILLICORES\n%s", usage)
		}
		m, err := strconv.Atoi(pos[0])
		if err != nil || m <= 0 || m > 1000 {
			return fmt.Errorf("burn: %q is not a number of millicores from 1 to 1000", pos[0])
		}
		Burn(ctx, m)
		return nil
	case "fill":
		// Writes MEBIBYTES of data to FILE, then holds it until stopped: a pod that uses
		// disk, for eviction tests.
		if len(pos) != 2 {
			return fmt.Errorf("fill: FILE MEBIBYTES\n%s", usage)
		}
		n, err := strconv.Atoi(pos[1])
		if err != nil || n < 0 {
			return fmt.Errorf("fill: %q is not a number of mebibytes", pos[1])
		}
		if err := Fill(pos[0], n); err != nil {
			return err
		}
		fmt.Fprintf(out, "filled %s with %d MiB\n", pos[0], n)
		<-ctx.Done()
		return nil
	case "sleep":
		d := time.Duration(1<<63 - 1)
		if len(pos) == 1 {
			var err error
			if d, err = time.ParseDuration(pos[0]); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

// Burn keeps one CPU busy for millicores thousandths of the time until ctx ends (load for
// an HorizontalPodAutoscaler to see): it spins for that share of every 10 ms and sleeps the rest.
func Burn(ctx context.Context, millicores int) {
	const period = 10 * time.Millisecond
	busy := period * time.Duration(millicores) / 1000
	for ctx.Err() == nil {
		start := time.Now()
		for time.Since(start) < busy {
		}
		time.Sleep(period - busy)
	}
}

// Handler serves /hostname, /clientip and /echo?msg=.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/hostname", func(w http.ResponseWriter, r *http.Request) {
		h, _ := os.Hostname()
		fmt.Fprint(w, h)
	})
	mux.HandleFunc("/clientip", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.RemoteAddr)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.URL.Query().Get("msg"))
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	return mux
}

// Serve runs the HTTP server until ctx ends.
func Serve(ctx context.Context, addr string) error {
	srv := &http.Server{Addr: addr, Handler: Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Fetch prints the body of a GET.
func Fetch(ctx context.Context, url string, timeout time.Duration, out io.Writer) error {
	return FetchFrom(ctx, url, timeout, 0, out)
}

// FetchFrom is Fetch from a chosen local TCP port (0: any), on a connection of its own that
// this side resets when done (so the flow is free again at once, at both ends): the same
// ports each time make the same flow, as load balancers hash it.
func FetchFrom(ctx context.Context, url string, timeout time.Duration, port int, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	client := http.DefaultClient
	if port != 0 {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{Port: port}, Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			// Reusable at once, and closed with a reset (no TIME_WAIT here to block the same
			// flow's next connection).
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
				if serr == nil {
					serr = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 0})
				}
			}); err != nil {
				return err
			}
			return serr
		}}
		// The connection stays open after the answer (no "Connection: close", so the server
		// does not close first and keep the flow in TIME_WAIT); closing the idle connection
		// once the body is read resets it from this side.
		tr := &http.Transport{DialContext: d.DialContext}
		defer tr.CloseIdleConnections()
		client = &http.Client{Transport: tr}
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(out, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// Connect opens a TCP connection (or sends a UDP probe and waits for the echo) and reports it.
func Connect(addr string, udp bool, timeout time.Duration, out io.Writer) error {
	if !udp {
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "connected to %s from %s\n", c.RemoteAddr(), c.LocalAddr())
		return c.Close()
	}
	c, err := net.DialTimeout("udp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("netutil\n")); err != nil {
		return err
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		return fmt.Errorf("no UDP answer from %s: %w", addr, err)
	}
	fmt.Fprintf(out, "udp answer from %s: %s", addr, buf[:n])
	return nil
}

// Hold keeps one TCP connection to the echo server at addr: every interval it sends a line
// and waits (up to timeout) for its echo, printing "held N round trips on LOCAL -> REMOTE"
// each second. The first round trip that fails ends it with an error: the flow broke.
func Hold(ctx context.Context, addr string, interval, timeout time.Duration, out io.Writer) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(out, "holding %s -> %s\n", c.LocalAddr(), c.RemoteAddr())
	r := bufio.NewReader(c)
	t := time.NewTicker(interval)
	defer t.Stop()
	last := time.Now()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			fmt.Fprintf(out, "held %d round trips on %s -> %s; stopped\n", n-1, c.LocalAddr(), c.RemoteAddr())
			return nil
		case <-t.C:
		}
		_ = c.SetDeadline(time.Now().Add(timeout))
		want := strconv.Itoa(n)
		if _, err := fmt.Fprintln(c, want); err != nil {
			return fmt.Errorf("flow broken after %d round trips: %w", n-1, err)
		}
		got, err := r.ReadString('\n')
		if err != nil || strings.TrimSpace(got) != want {
			return fmt.Errorf("flow broken after %d round trips: echo %q: %v", n-1, got, err)
		}
		if time.Since(last) >= time.Second {
			fmt.Fprintf(out, "held %d round trips on %s -> %s\n", n, c.LocalAddr(), c.RemoteAddr())
			last = time.Now()
		}
	}
}

// Echo runs a TCP (line) or UDP (datagram) echo server until ctx ends.
func Echo(ctx context.Context, addr string, udp bool) error {
	if udp {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return err
		}
		go func() { <-ctx.Done(); pc.Close() }()
		buf := make([]byte, 64<<10)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go func() {
			defer c.Close()
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				if _, err := fmt.Fprintln(c, sc.Text()); err != nil {
					return
				}
			}
		}()
	}
}

// Probe dials TCP port on every address of prefix (at most 1024 of them), each again and
// again as fast as the answers come back (50 ms per attempt at most), for d, and prints
// "ADDRESS UNIX-NANOSECONDS" for each address at the first connection it accepted. It is
// the network policy e2e's watcher of the pod-start race: run from outside a node, it sees a
// pod's port the moment any packet of the pod's gets through.
func Probe(ctx context.Context, prefix netip.Prefix, port int, d time.Duration, out io.Writer) error {
	prefix = prefix.Masked()
	if !prefix.Addr().Is4() || prefix.Bits() < 22 {
		return fmt.Errorf("probe: %s: want an IPv4 prefix of /22 or longer", prefix)
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for a := prefix.Addr(); prefix.Contains(a); a = a.Next() {
		wg.Add(1)
		go func(target string) {
			defer wg.Done()
			dialer := net.Dialer{Timeout: 50 * time.Millisecond}
			for ctx.Err() == nil {
				c, err := dialer.DialContext(ctx, "tcp", target)
				if err != nil {
					// A refusal or an unreachable comes back at once: pace those attempts.
					time.Sleep(5 * time.Millisecond)
					continue
				}
				at := time.Now().UnixNano()
				c.Close()
				mu.Lock()
				fmt.Fprintln(out, strings.Split(target, ":")[0], at)
				mu.Unlock()
				return
			}
		}(net.JoinHostPort(a.String(), fmt.Sprint(port)))
	}
	wg.Wait()
	return nil
}

// Fill writes mib mebibytes of non-zero data to path (making its directory) and syncs it, so
// the blocks are allocated, not a sparse file's holes.
func Fill(path string, mib int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	chunk := []byte(strings.Repeat("skiff fill\n", 1<<20/11+1)[:1<<20])
	for i := 0; i < mib; i++ {
		if _, err := f.Write(chunk); err != nil {
			f.Close()
			return err
		}
	}
	return errors.Join(f.Sync(), f.Close())
}
