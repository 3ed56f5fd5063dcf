package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The wire format. Scalars stay raw so that their errors can name the field path; the
// containers are typed so that yaml.UnmarshalStrict rejects what they do not know.
type fileConfig struct {
	ASN             json.RawMessage      `json:"asn"`
	NodeMesh        json.RawMessage      `json:"nodeMesh"`
	ListenPort      json.RawMessage      `json:"listenPort"`
	Peers           []filePeer           `json:"peers"`
	GracefulRestart *fileGracefulRestart `json:"gracefulRestart"`
	BFD             *fileBFD             `json:"bfd"`
	// LoadBalancerPools are read by the control plane's LoadBalancer address allocator
	// (LoadBalancerPools); the speakers only accept them.
	LoadBalancerPools []filePool `json:"loadBalancerPools"`
}

type filePool struct {
	CIDR json.RawMessage `json:"cidr"`
}

type filePeer struct {
	Address        json.RawMessage   `json:"address"`
	ASN            json.RawMessage   `json:"asn"`
	PasswordSecret *fileSecretRef    `json:"passwordSecret"`
	HoldTime       json.RawMessage   `json:"holdTime"`
	KeepaliveTime  json.RawMessage   `json:"keepaliveTime"`
	EBGPMultihop   json.RawMessage   `json:"ebgpMultihop"`
	NodeSelector   map[string]string `json:"nodeSelector"`
}

// Secret names and keys are plain strings: a YAML number such as key: 1 becomes "1".
type fileSecretRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

type fileBFD struct {
	Enabled          json.RawMessage `json:"enabled"`
	TransmitInterval json.RawMessage `json:"transmitInterval"`
	Multiplier       json.RawMessage `json:"multiplier"`
}

type fileGracefulRestart struct {
	Enabled     json.RawMessage `json:"enabled"`
	RestartTime json.RawMessage `json:"restartTime"`
}

// shape describes the YAML the wire types accept, for errors that name a path and for
// exact-case field matching (encoding/json matches field names case-insensitively).
type shape struct {
	what   string            // for errors: "a mapping", "an integer", ...
	kind   shapeKind         //
	fields map[string]*shape // shapeObject
	elem   *shape            // shapeList, shapeMap values
}

type shapeKind int

const (
	shapeScalar shapeKind = iota // any non-container; typed checks happen later
	shapeString                  // a string, nothing else
	shapeObject                  // fixed fields
	shapeList
	shapeMap // free string keys
)

var (
	scalar     = func(what string) *shape { return &shape{what: what, kind: shapeScalar} }
	str        = &shape{what: "a string", kind: shapeString}
	secretRefS = &shape{what: "a mapping", kind: shapeObject, fields: map[string]*shape{
		"name": str, "key": str,
	}}
	peerShape = &shape{what: "a mapping", kind: shapeObject, fields: map[string]*shape{
		"address":        scalar("an IP address"),
		"asn":            scalar("an integer"),
		"passwordSecret": secretRefS,
		"holdTime":       scalar("a duration"),
		"keepaliveTime":  scalar("a duration"),
		"ebgpMultihop":   scalar("an integer"),
		"nodeSelector":   {what: "a mapping of label keys to values", kind: shapeMap, elem: str},
	}}
	peerListShape = &shape{what: "a list of peers", kind: shapeList, elem: peerShape}
	configShape   = &shape{what: "a mapping", kind: shapeObject, fields: map[string]*shape{
		"asn":        scalar("an integer"),
		"nodeMesh":   scalar("a boolean"),
		"listenPort": scalar("an integer"),
		"peers":      peerListShape,
		"gracefulRestart": {what: "a mapping", kind: shapeObject, fields: map[string]*shape{
			"enabled": scalar("a boolean"), "restartTime": scalar("a duration"),
		}},
		"bfd": {what: "a mapping", kind: shapeObject, fields: map[string]*shape{
			"enabled": scalar("a boolean"), "transmitInterval": scalar("a duration"), "multiplier": scalar("an integer"),
		}},
		"loadBalancerPools": {what: "a list of pools", kind: shapeList, elem: &shape{what: "a mapping", kind: shapeObject, fields: map[string]*shape{
			"cidr": scalar("a CIDR"),
		}}},
	}}
)

// fieldError is an error about the value at a path of a document.
func fieldError(src, path string, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if path == "" {
		return fmt.Errorf("%s: %s", src, msg)
	}
	return fmt.Errorf("%s: %s: %s", src, path, msg)
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

// check walks a decoded document against s. A null is accepted anywhere a value is
// optional (it means unset), but not as a list element or label value.
func (s *shape) check(src, path string, v any) error {
	if v == nil {
		return nil
	}
	switch s.kind {
	case shapeScalar:
		switch v.(type) {
		case map[string]any, []any:
			return fieldError(src, path, "must be %s, got %s", s.what, kindOf(v))
		}
	case shapeString:
		switch v.(type) {
		case string:
		case bool:
			// Let through, yaml.v2 would turn key: y into "true".
			return fieldError(src, path, "must be a string, got a boolean (quote it: YAML reads y, n, yes, no, on, off, true, false as booleans)")
		case float64:
			return fieldError(src, path, "must be a string, got a number (quote it)")
		default:
			return fieldError(src, path, "must be a string, got %s", kindOf(v))
		}
	case shapeObject:
		m, ok := v.(map[string]any)
		if !ok {
			return fieldError(src, path, "must be %s, got %s", s.what, kindOf(v))
		}
		for _, k := range sortedKeys(m) {
			f, ok := s.fields[k]
			if !ok {
				return fieldError(src, path, "unknown field %q (%s)", k, s.hint(k))
			}
			if err := f.check(src, join(path, k), m[k]); err != nil {
				return err
			}
		}
	case shapeList:
		l, ok := v.([]any)
		if !ok {
			return fieldError(src, path, "must be %s, got %s", s.what, kindOf(v))
		}
		for i, e := range l {
			p := fmt.Sprintf("%s[%d]", path, i)
			if e == nil {
				return fieldError(src, p, "must be %s, got null", s.elem.what)
			}
			if err := s.elem.check(src, p, e); err != nil {
				return err
			}
		}
	case shapeMap:
		m, ok := v.(map[string]any)
		if !ok {
			return fieldError(src, path, "must be %s, got %s", s.what, kindOf(v))
		}
		for _, k := range sortedKeys(m) {
			p := join(path, k)
			if m[k] == nil {
				return fieldError(src, p, "must be %s, got null", s.elem.what)
			}
			if err := s.elem.check(src, p, m[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// hint suggests the field meant by an unknown one.
func (s *shape) hint(k string) string {
	known := sortedKeys(s.fields)
	for _, f := range known {
		if strings.EqualFold(f, k) {
			return fmt.Sprintf("did you mean %q? field names are case-sensitive", f)
		}
	}
	return "known fields: " + strings.Join(known, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// decode parses a YAML (or JSON) document into out, checking it against s first. An empty
// or null document is accepted only when allowNull.
func decode(src string, data []byte, s *shape, allowNull bool, out any) (err error) {
	// The YAML library is not ours; whatever it does, a bad document is an error, not a
	// crashed agent.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: invalid YAML: %v", src, r)
		}
	}()
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: invalid YAML: %s", src, yamlErrorText(err))
	}
	if doc == nil && !allowNull {
		return fmt.Errorf("%s: must be %s, got null", src, s.what)
	}
	if err := s.check(src, "", doc); err != nil {
		return err
	}
	// Strict decoding adds what the generic pass cannot see: duplicate keys.
	if err := yaml.UnmarshalStrict(data, out); err != nil {
		return fmt.Errorf("%s: %s", src, yamlErrorText(err))
	}
	return nil
}

// yamlErrorText drops sigs.k8s.io/yaml's pipeline prefixes.
func yamlErrorText(err error) string {
	s := err.Error()
	for _, p := range []string{"error converting YAML to JSON: ", "error unmarshaling JSON: ", "while decoding JSON: "} {
		s = strings.TrimPrefix(s, p)
	}
	// yaml.v2 lists several errors on indented lines.
	return strings.Join(strings.Fields(strings.ReplaceAll(s, ":\n", ":")), " ")
}

// Raw scalar decoding. A missing field and an explicit null are both "unset" (ok false).

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

func rawKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return "nothing"
	case raw[0] == '"':
		return "a string"
	case raw[0] == 't' || raw[0] == 'f':
		return "a boolean"
	case raw[0] == '{':
		return "a mapping"
	case raw[0] == '[':
		return "a list"
	}
	return "a number"
}

func rawString(src, path string, raw json.RawMessage, what string) (string, bool, error) {
	if isNull(raw) {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, fieldError(src, path, "must be %s, got %s", what, rawKind(raw))
	}
	return s, true, nil
}

func rawBool(src, path string, raw json.RawMessage) (*bool, error) {
	if isNull(raw) {
		return nil, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fieldError(src, path, "must be a boolean (true or false), got %s", rawKind(raw))
	}
	return &b, nil
}

var errNotInteger = errors.New("not an integer")

// rawInt reads an integer in [lo, hi].
func rawInt(src, path string, raw json.RawMessage, lo, hi int64) (int64, bool, error) {
	if isNull(raw) {
		return 0, false, nil
	}
	v, err := parseInteger(raw)
	if errors.Is(err, errNotInteger) {
		return 0, false, fieldError(src, path, "must be an integer, got %s", rawText(raw))
	}
	if err != nil || v < lo || v > hi {
		return 0, false, fieldError(src, path, "%s is out of range: must be between %d and %d", rawText(raw), lo, hi)
	}
	return v, true, nil
}

// parseInteger reads a JSON number that is an integer; an integer too large for int64 is
// math.MaxInt64 with a range error.
func parseInteger(raw json.RawMessage) (int64, error) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || rawKind(raw) != "a number" {
		return 0, errNotInteger
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err == nil {
		return v, nil
	}
	if errors.Is(err, strconv.ErrRange) {
		return math.MaxInt64, err
	}
	// Floats: YAML's 64512.0 reaches us as 64512, but huge integers come as 1e+21.
	f, ferr := strconv.ParseFloat(s, 64)
	if ferr != nil || f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, errNotInteger
	}
	return math.MaxInt64, strconv.ErrRange
}

// rawText shows a raw value in an error, shortened.
func rawText(raw json.RawMessage) string {
	s := string(bytes.TrimSpace(raw))
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}

func rawASN(src, path string, raw json.RawMessage) (*uint32, error) {
	if isNull(raw) {
		return nil, nil
	}
	v, err := parseInteger(raw)
	if errors.Is(err, errNotInteger) {
		return nil, fieldError(src, path, "must be an integer AS number, got %s", rawText(raw))
	}
	if err != nil {
		return nil, fieldError(src, path, "%s is out of range: must be between 1 and 4294967295", rawText(raw))
	}
	if err := checkASN(v); err != nil {
		return nil, fieldError(src, path, "%v", err)
	}
	u := uint32(v)
	return &u, nil
}

// rawDuration reads a Go duration string or an integer number of seconds.
func rawDuration(src, path string, raw json.RawMessage) (*time.Duration, error) {
	if isNull(raw) {
		return nil, nil
	}
	var d time.Duration
	switch rawKind(raw) {
	case "a string":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fieldError(src, path, "must be a duration, got %s", rawText(raw))
		}
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return nil, fieldError(src, path, "%q is not a duration (e.g. \"9s\", \"1m30s\")", s)
		}
	case "a number":
		v, err := parseInteger(raw)
		if errors.Is(err, errNotInteger) {
			return nil, fieldError(src, path, "%s is not a whole number of seconds", rawText(raw))
		}
		if err != nil || v > int64(math.MaxInt64/time.Second) {
			return nil, fieldError(src, path, "%s seconds is out of range", rawText(raw))
		}
		d = time.Duration(v) * time.Second
	default:
		return nil, fieldError(src, path, "must be a duration (e.g. \"9s\") or a number of seconds, got %s", rawKind(raw))
	}
	if d < 0 {
		return nil, fieldError(src, path, "%s is negative", d)
	}
	return &d, nil
}

// clusterSettings is what the ConfigMap sets; nil pointers are unset.
type clusterSettings struct {
	src           string
	asn           *uint32
	nodeMesh      *bool
	listenPort    *int32
	peers         []peerSpec
	grEnabled     *bool
	grRestartTime *time.Duration
	bfd           *BFD
}

func parseConfigMap(cm *corev1.ConfigMap) (clusterSettings, error) {
	if cm == nil {
		return clusterSettings{}, nil
	}
	cmName := fmt.Sprintf("configmap %s/%s", cm.Namespace, cm.Name)
	data, ok := cm.Data[ConfigKey]
	if !ok {
		if _, bin := cm.BinaryData[ConfigKey]; bin {
			return clusterSettings{}, fmt.Errorf("%s: key %q must be under data, not binaryData", cmName, ConfigKey)
		}
		return clusterSettings{}, fmt.Errorf("%s: missing data key %q (data keys: %q)", cmName, ConfigKey, sortedKeys(cm.Data))
	}
	src := cmName + ": " + ConfigKey
	cs := clusterSettings{src: src}
	var f fileConfig
	if err := decode(src, []byte(data), configShape, true, &f); err != nil {
		return clusterSettings{}, err
	}
	var err error
	if cs.asn, err = rawASN(src, "asn", f.ASN); err != nil {
		return clusterSettings{}, err
	}
	if cs.nodeMesh, err = rawBool(src, "nodeMesh", f.NodeMesh); err != nil {
		return clusterSettings{}, err
	}
	if v, ok, err := rawInt(src, "listenPort", f.ListenPort, 1, 65535); err != nil {
		return clusterSettings{}, err
	} else if ok {
		p := int32(v)
		cs.listenPort = &p
	}
	if gr := f.GracefulRestart; gr != nil {
		if cs.grEnabled, err = rawBool(src, "gracefulRestart.enabled", gr.Enabled); err != nil {
			return clusterSettings{}, err
		}
		if cs.grRestartTime, err = rawDuration(src, "gracefulRestart.restartTime", gr.RestartTime); err != nil {
			return clusterSettings{}, err
		}
		if cs.grRestartTime != nil {
			if err := checkRestartTime(*cs.grRestartTime); err != nil {
				return clusterSettings{}, fieldError(src, "gracefulRestart.restartTime", "%v", err)
			}
		}
	}
	if b := f.BFD; b != nil {
		if cs.bfd, err = parseBFD(src, b); err != nil {
			return clusterSettings{}, err
		}
	}
	if cs.peers, err = parsePeers(src, "peers", f.Peers); err != nil {
		return clusterSettings{}, err
	}
	return cs, nil
}

// parseBFD reads the bfd section: given at all, it is on unless enabled says false.
func parseBFD(src string, f *fileBFD) (*BFD, error) {
	b := DefaultBFD
	b.Enabled = true
	on, err := rawBool(src, "bfd.enabled", f.Enabled)
	if err != nil {
		return nil, err
	}
	if on != nil {
		b.Enabled = *on
	}
	iv, err := rawDuration(src, "bfd.transmitInterval", f.TransmitInterval)
	if err != nil {
		return nil, err
	}
	if iv != nil {
		if *iv < 10*time.Millisecond || *iv > time.Minute || *iv%time.Millisecond != 0 {
			return nil, fieldError(src, "bfd.transmitInterval", "%s must be whole milliseconds from 10ms to 1m", *iv)
		}
		b.TransmitInterval = *iv
	}
	if v, ok, err := rawInt(src, "bfd.multiplier", f.Multiplier, 1, 255); err != nil {
		return nil, err
	} else if ok {
		b.Multiplier = uint8(v)
	}
	return &b, nil
}

// annotationSettings is what the node's annotations set.
type annotationSettings struct {
	asn      *uint32
	nodeMesh *bool
	peers    []peerSpec
	peersSet bool
	peersSrc string
}

func annotationSrc(node *corev1.Node, key string) string {
	return fmt.Sprintf("node %q: annotation %s", node.Name, key)
}

func parseAnnotations(node *corev1.Node) (annotationSettings, error) {
	var as annotationSettings
	if v, ok := node.Annotations[AnnotationASN]; ok {
		asn, err := parseASNAnnotation(v)
		if err != nil {
			return as, fmt.Errorf("%s: %w", annotationSrc(node, AnnotationASN), err)
		}
		as.asn = &asn
	}
	if v, ok := node.Annotations[AnnotationNodeMesh]; ok {
		var b bool
		switch v {
		case "true":
			b = true
		case "false":
		default:
			return as, fmt.Errorf("%s: %q must be \"true\" or \"false\"", annotationSrc(node, AnnotationNodeMesh), v)
		}
		as.nodeMesh = &b
	}
	if v, ok := node.Annotations[AnnotationPeers]; ok {
		src := annotationSrc(node, AnnotationPeers)
		if strings.TrimSpace(v) == "" {
			return as, fmt.Errorf("%s: empty; use \"[]\" for no peers", src)
		}
		var raw []filePeer
		if err := decode(src, []byte(v), peerListShape, false, &raw); err != nil {
			return as, err
		}
		peers, err := parsePeers(src, "", raw)
		if err != nil {
			return as, err
		}
		as.peers, as.peersSet, as.peersSrc = peers, true, src
	}
	return as, nil
}

// parseASNAnnotation reads a decimal AS number.
func parseASNAnnotation(v string) (uint32, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("%q is out of range: must be between 1 and 4294967295", v)
		}
		return 0, fmt.Errorf("%q is not a decimal AS number", v)
	}
	if n > math.MaxUint32 {
		return 0, fmt.Errorf("%d is out of range: must be between 1 and 4294967295", n)
	}
	if err := checkASN(int64(n)); err != nil {
		return 0, err
	}
	return uint32(n), nil
}
