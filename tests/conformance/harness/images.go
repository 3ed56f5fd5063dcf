package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/skiff-sh/skiff/images/oci"
)

// Sources are the local files the conformance images are assembled from: no registry is
// reachable, so every image the e2e framework asks for is built here under the exact
// reference it asks for (e2e.test --list-images).
type Sources struct {
	// Agnhost is a static build of k8s.io/kubernetes/test/images/agnhost; KubeSrc the
	// k8s.io/kubernetes module directory (agnhost's porter certificates, kitten's and
	// nautilus's pages).
	Agnhost, KubeSrc string
	// Busybox is a static BusyBox 1.37 as upstream releases it (hack/build-busybox.sh); Pause
	// skiff's own pause binary.
	Busybox, Pause string
	// SampleAPIServer is a static build of k8s.io/sample-apiserver; Etcd Debian's etcd.
	SampleAPIServer, Etcd string
	// Nonewprivs is a static build of k8s.io/kubernetes/test/images/nonewprivs (nnp).
	Nonewprivs string
}

// builder makes the image for one repository (the reference without registry and tag).
type builder func(src Sources, ref string) (oci.Image, error)

// builders knows every image the [Conformance] specs use that can be made from Debian's
// packages and Go source. The others are reported as not built, and their specs fail with
// ErrImagePull, named in RESULTS.md.
var builders = map[string]builder{
	"e2e-test-images/agnhost":           agnhostImage(nil),
	"e2e-test-images/kitten":            agnhostImage(pages("kitten")),
	"e2e-test-images/nautilus":          agnhostImage(pages("nautilus")),
	"e2e-test-images/busybox":           busyboxImage(""),
	"e2e-test-images/nonroot":           busyboxImage("1234"),
	"e2e-test-images/nonewprivs":        nonewprivsImage,
	"e2e-test-images/nginx":             nginxImage,
	"e2e-test-images/glibc-dns-testing": glibcDNSImage,
	"e2e-test-images/sample-apiserver":  sampleAPIServerImage,
	"etcd":                              etcdImage,
	"pause":                             pauseImage,
}

// repository strips the registry and the tag: registry.k8s.io/e2e-test-images/agnhost:2.66.1
// → e2e-test-images/agnhost.
func repository(ref string) string {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	if i := strings.Index(ref, "/"); i >= 0 && strings.ContainsAny(ref[:i], ".:") {
		ref = ref[i+1:]
	}
	return ref
}

// archiveName is the file an image's archive is written to.
func archiveName(ref string) string {
	return strings.NewReplacer("/", "_", ":", "_").Replace(ref) + ".tar"
}

// BuildImages writes an archive for every listed reference it knows how to build into dir,
// returning the archives and the references it could not build.
func BuildImages(src Sources, refs []string, dir string) (files, missing []string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	for _, ref := range refs {
		b, ok := builders[repository(ref)]
		if !ok {
			missing = append(missing, ref)
			continue
		}
		img, err := b(src, ref)
		if err != nil {
			return nil, nil, fmt.Errorf("image %s: %w", ref, err)
		}
		img.Name = ref
		file := filepath.Join(dir, archiveName(ref))
		if err := oci.WriteFile(file, img); err != nil {
			return nil, nil, fmt.Errorf("image %s: %w", ref, err)
		}
		files = append(files, file)
	}
	sort.Strings(missing)
	return files, missing, nil
}

const imagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// base is what every image but pause has: busybox's applets for the shell commands specs
// run in containers, /etc/passwd and /etc/group with the users upstream's images define,
// and a world-writable /tmp.
func base(src Sources) ([]oci.File, error) {
	bb, err := os.ReadFile(src.Busybox)
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(src.Busybox, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full: %w", src.Busybox, err)
	}
	files := []oci.File{
		{Path: "/bin/busybox", Mode: 0o755, Data: bb},
		{Path: "/tmp", Dir: true, Mode: 0o1777},
		// For the glibc programs copied in (getent, curl): /etc/hosts first, as Debian's.
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte("passwd: files\ngroup: files\nhosts: files dns\n")},
		{Path: "/root", Dir: true, Mode: 0o700},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\n" +
			"user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nuser-defined-in-image:x:1000:\n" +
			"group-defined-in-image:x:50000:user-defined-in-image\nnogroup:x:65534:\n")},
	}
	seen := map[string]bool{"bin/busybox": true}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		p := strings.TrimSpace(sc.Text())
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		files = append(files, oci.File{Path: "/" + p, Link: "/bin/busybox"})
		// Upstream's busybox image has every applet in /bin as well (specs run /bin/sysctl).
		if b := "bin/" + path.Base(p); !seen[b] {
			seen[b] = true
			files = append(files, oci.File{Path: "/" + b, Link: "/bin/busybox"})
		}
	}
	return files, nil
}

// withLibraries adds a dynamically linked program and the shared libraries ldd resolves for
// it, at the paths the loader looks for them.
func withLibraries(bin string) ([]oci.File, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	files := []oci.File{{Path: bin, Mode: 0o755, Data: data}}
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		return files, nil // static
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		var lib string
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			lib = f[2]
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			lib = f[0]
		default:
			continue
		}
		b, err := os.ReadFile(lib)
		if err != nil {
			return nil, fmt.Errorf("%s needs %s: %w", bin, lib, err)
		}
		files = append(files, oci.File{Path: lib, Mode: 0o755, Data: b})
	}
	return files, nil
}

// dedupe keeps the first file for each path (links first win over copies).
func dedupe(files []oci.File) []oci.File {
	seen := map[string]bool{}
	var out []oci.File
	for _, f := range files {
		p := path.Clean("/" + f.Path)
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, f)
	}
	return out
}

// agnhostImage is upstream's test image: /agnhost (and the agnhost-2 link the entrypoint
// specs use) over busybox, with /uploads for netexec, porter's certificates, and curl where
// the host has it. kitten and nautilus are agnhost serving two files with test-webserver.
func agnhostImage(extra func(Sources) ([]oci.File, error)) builder {
	return func(src Sources, ref string) (oci.Image, error) {
		bin, err := os.ReadFile(src.Agnhost)
		if err != nil {
			return oci.Image{}, err
		}
		files := []oci.File{
			{Path: "/agnhost", Mode: 0o755, Data: bin},
			{Path: "/agnhost-2", Link: "agnhost"},
			{Path: "/uploads", Dir: true, Mode: 0o755},
		}
		for _, name := range []string{"localhost.crt", "localhost.key"} {
			b, err := os.ReadFile(filepath.Join(src.KubeSrc, "test/images/agnhost/porter", name))
			if err != nil {
				return oci.Image{}, err
			}
			files = append(files, oci.File{Path: "/" + name, Mode: 0o644, Data: b})
		}
		// dig and getent for the DNS specs' musl querier (upstream's agnhost is Alpine's,
		// with bind-tools and musl-utils).
		for _, tool := range []string{"/usr/bin/curl", "/usr/bin/dig", "/usr/bin/getent"} {
			if _, err := os.Stat(tool); err == nil {
				more, err := withLibraries(tool)
				if err != nil {
					return oci.Image{}, err
				}
				files = append(files, more...)
			}
		}
		// The Services specs run `nc -v -t -w 2 HOST PORT` (and -u): Alpine's busybox nc has
		// those options; OpenBSD's netcat has them too, installed ahead of busybox on PATH, and
		// sh is bash, which looks commands up on PATH as Alpine's ash does.
		bash, err := withLibraries("/bin/bash")
		if err != nil {
			return oci.Image{}, err
		}
		files = append(append(files, bash...), oci.File{Path: "/bin/sh", Link: "/bin/bash"})
		if _, err := os.Stat("/bin/nc.openbsd"); err == nil {
			more, err := withLibraries("/bin/nc.openbsd")
			if err != nil {
				return oci.Image{}, err
			}
			more[0].Path = "/usr/bin/nc"
			files = append(files, more...)
		}
		cmd := []string{"pause"}
		if extra != nil {
			more, err := extra(src)
			if err != nil {
				return oci.Image{}, err
			}
			files = append(files, more...)
			cmd = []string{"test-webserver"}
		}
		b, err := base(src)
		if err != nil {
			return oci.Image{}, err
		}
		return oci.Image{Entrypoint: []string{"/agnhost"}, Cmd: cmd, Env: []string{imagePath},
			Files: dedupe(append(files, b...))}, nil
	}
}

// glibcDNSImage is upstream's glibc-dns-testing (formerly jessie-dnsutils): the DNS specs'
// glibc querier runs dig and getent in it, so both are Debian's own, with glibc's resolver
// (nss files and dns are part of libc.so.6 since glibc 2.34), over busybox's applets.
func glibcDNSImage(src Sources, ref string) (oci.Image, error) {
	var files []oci.File
	for _, tool := range []string{"/usr/bin/dig", "/usr/bin/getent"} {
		more, err := withLibraries(tool)
		if err != nil {
			return oci.Image{}, fmt.Errorf("%w (dig is Debian's bind9-dnsutils: make deps installs it)", err)
		}
		files = append(files, more...)
	}
	b, err := base(src)
	if err != nil {
		return oci.Image{}, err
	}
	return oci.Image{Cmd: []string{"sh"}, Env: []string{imagePath}, Files: dedupe(append(files, b...))}, nil
}

// alpineOSRelease is the /etc/os-release of upstream's kitten and nautilus, which are agnhost
// and so Alpine: the ImageVolume spec mounts kitten as a volume and reads it. The substitutes
// are not Alpine; this one file is what the spec checks came through the volume from the image.
const alpineOSRelease = `NAME="Alpine Linux"
ID=alpine
VERSION_ID=3.21.3
PRETTY_NAME="Alpine Linux v3.21"
HOME_URL="https://alpinelinux.org/"
BUG_REPORT_URL="https://gitlab.alpinelinux.org/alpine/aports/-/issues"
`

// pages are kitten's or nautilus's two files, served from / as upstream's images do, and
// their os-release.
func pages(name string) func(Sources) ([]oci.File, error) {
	return func(src Sources) ([]oci.File, error) {
		files := []oci.File{{Path: "/etc/os-release", Mode: 0o644, Data: []byte(alpineOSRelease)}}
		for _, f := range []string{name + ".jpg", "data.json"} {
			b, err := os.ReadFile(filepath.Join(src.KubeSrc, "test/images", name, "html", f))
			if err != nil {
				return nil, err
			}
			files = append(files, oci.File{Path: "/" + f, Mode: 0o644, Data: b})
		}
		return files, nil
	}
}

// busyboxImage is busybox with `sh` as its command; nonroot is the same as user 1234. Its sh
// is BusyBox's ash, as upstream's image: the specs read its messages ("/bin/sh: can't create
// /file: Read-only file system") and, with `sh -c env`, environment variables whose names are
// not shell identifiers ("data-1"), which upstream's ash passes on (Debian's drops them, which
// is why the harness builds its own BusyBox).
func busyboxImage(user string) builder {
	return func(src Sources, ref string) (oci.Image, error) {
		files, err := base(src)
		if err != nil {
			return oci.Image{}, err
		}
		return oci.Image{Cmd: []string{"sh"}, Env: []string{imagePath}, User: user, Files: files}, nil
	}
}

// nonewprivsImage is upstream's nonewprivs: nnp, which prints its effective uid, installed
// setuid root as /usr/local/bin/nnp and run by default, over busybox (upstream's is Alpine). Run
// as a user, it prints 0 unless the container has no_new_privs (allowPrivilegeEscalation false).
func nonewprivsImage(src Sources, ref string) (oci.Image, error) {
	nnp, err := os.ReadFile(src.Nonewprivs)
	if err != nil {
		return oci.Image{}, fmt.Errorf("nnp (make conformance-bin builds it): %w", err)
	}
	files, err := base(src)
	if err != nil {
		return oci.Image{}, err
	}
	files = append(files, oci.File{Path: "/usr/local/bin/nnp", Mode: 0o4755, Data: nnp})
	return oci.Image{Cmd: []string{"nnp"}, Env: []string{imagePath}, Files: files}, nil
}

// nginxConf serves /usr/share/nginx/html on port 80 in the foreground, logging to the
// container's output, as the nginx image upstream's specs use does.
const nginxConf = `daemon off;
user nobody nogroup;
worker_processes 1;
error_log /dev/stderr;
pid /run/nginx.pid;
events { worker_connections 1024; }
http {
  types { text/html html htm; application/json json; image/jpeg jpg jpeg; text/plain txt; }
  default_type application/octet-stream;
  access_log /dev/stdout;
  sendfile on;
  server {
    listen 80 default_server;
    listen [::]:80 default_server;
    root /usr/share/nginx/html;
    index index.html;
    location / { try_files $uri $uri/ =404; }
  }
}
`

// nginxImage is Debian's nginx with its libraries over busybox.
func nginxImage(src Sources, ref string) (oci.Image, error) {
	files, err := withLibraries("/usr/sbin/nginx")
	if err != nil {
		return oci.Image{}, err
	}
	files = append(files,
		oci.File{Path: "/etc/nginx/nginx.conf", Mode: 0o644, Data: []byte(nginxConf)},
		oci.File{Path: "/usr/share/nginx/html/index.html", Mode: 0o644, Data: []byte("<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head>\n<body><h1>Welcome to nginx!</h1></body></html>\n")},
		oci.File{Path: "/var/log/nginx", Dir: true, Mode: 0o755},
		oci.File{Path: "/var/lib/nginx", Dir: true, Mode: 0o755},
		oci.File{Path: "/run", Dir: true, Mode: 0o755},
	)
	b, err := base(src)
	if err != nil {
		return oci.Image{}, err
	}
	return oci.Image{Entrypoint: []string{"/usr/sbin/nginx"}, Env: []string{imagePath},
		Files: dedupe(append(files, b...))}, nil
}

// pauseImage is skiff's own pause under upstream's name.
func pauseImage(src Sources, ref string) (oci.Image, error) {
	b, err := os.ReadFile(src.Pause)
	if err != nil {
		return oci.Image{}, err
	}
	return oci.Image{Entrypoint: []string{"/pause"}, Files: []oci.File{{Path: "/pause", Mode: 0o755, Data: b}}}, nil
}

// sampleAPIServerImage is upstream's sample-apiserver (the aggregation layer's spec runs it
// behind an APIService): a build of k8s.io/sample-apiserver as /sample-apiserver over busybox.
func sampleAPIServerImage(src Sources, ref string) (oci.Image, error) {
	bin, err := os.ReadFile(src.SampleAPIServer)
	if err != nil {
		return oci.Image{}, err
	}
	b, err := base(src)
	if err != nil {
		return oci.Image{}, err
	}
	return oci.Image{Entrypoint: []string{"/sample-apiserver"}, Env: []string{imagePath},
		Files: dedupe(append([]oci.File{{Path: "/sample-apiserver", Mode: 0o755, Data: bin}}, b...))}, nil
}

// etcdImage is registry.k8s.io/etcd as the sample-apiserver's spec uses it: Debian's etcd
// (etcd-server) with its libraries, at /usr/local/bin/etcd.
func etcdImage(src Sources, ref string) (oci.Image, error) {
	files, err := withLibraries(src.Etcd)
	if err != nil {
		return oci.Image{}, fmt.Errorf("%w (Debian's etcd-server: make deps installs it)", err)
	}
	bin, err := os.ReadFile(src.Etcd)
	if err != nil {
		return oci.Image{}, err
	}
	files = append(files, oci.File{Path: "/usr/local/bin/etcd", Mode: 0o755, Data: bin}, oci.File{Path: "/var/lib/etcd", Dir: true, Mode: 0o700})
	b, err := base(src)
	if err != nil {
		return oci.Image{}, err
	}
	return oci.Image{Env: []string{imagePath, "ETCD_DATA_DIR=/var/lib/etcd"}, Files: dedupe(append(files, b...))}, nil
}
