package validation

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Upstream's bounds on pod certificates (k8s.io/kubernetes/pkg/apis/certificates).
const (
	// MinMaxExpirationSeconds is the shortest lifetime a pod may ask for (1 hour).
	MinMaxExpirationSeconds = 60 * 60
	// MaxMaxExpirationSeconds is the longest for other signers (91 days).
	MaxMaxExpirationSeconds = 91 * 24 * 60 * 60
	// KubernetesMaxMaxExpirationSeconds is the longest for kubernetes.io signers (24 hours).
	KubernetesMaxMaxExpirationSeconds = 24 * 60 * 60
	// DefaultMaxExpirationSeconds is what a request that names none gets (24 hours).
	DefaultMaxExpirationSeconds = 24 * 60 * 60

	maxStubPKCS10RequestSize = 10 * 1024
	maxCertificateChainSize  = 100 * 1024
)

// PodCertificateKeyTypes are the key types a podCertificate projection may ask for.
var PodCertificateKeyTypes = []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"}

// IsKubernetesSignerName says whether signer belongs to the Kubernetes project
// (kubernetes.io or a subdomain), whose pod certificates live at most 24 hours.
func IsKubernetesSignerName(signer string) bool {
	host, _, _ := strings.Cut(signer, "/")
	return host == "kubernetes.io" || strings.HasSuffix(host, ".kubernetes.io")
}

// MaxExpirationFor is the longest maxExpirationSeconds a request to signer may carry.
func MaxExpirationFor(signer string) int32 {
	if IsKubernetesSignerName(signer) {
		return KubernetesMaxMaxExpirationSeconds
	}
	return MaxMaxExpirationSeconds
}

var (
	pcrSpec       = field.NewPath("spec")
	pkcs10Path    = pcrSpec.Child("stubPKCS10Request")
	chainPath     = field.NewPath("status", "certificateChain")
	notBeforePath = field.NewPath("status", "notBefore")
	notAfterPath  = field.NewPath("status", "notAfter")
	refreshPath   = field.NewPath("status", "beginRefreshAt")
)

// PodCertificateRequest validates a new request as a node's agent makes it: who it is for
// (pod, service account, node, each with its UID), the signer, a lifetime in range, and a
// stub PKCS#10 request whose signature proves the agent holds the private key.
func PodCertificateRequest(r *certificatesv1.PodCertificateRequest) field.ErrorList {
	errs := ObjectMeta(&r.ObjectMeta, true, DNSSubdomain)
	errs = append(errs, signerName(r.Spec.SignerName, pcrSpec.Child("signerName"))...)
	if r.Spec.UnverifiedUserAnnotations != nil {
		errs = append(errs, UserAnnotations(r.Spec.UnverifiedUserAnnotations, pcrSpec.Child("unverifiedUserAnnotations"))...)
	}
	name := func(p *field.Path, value string, rule apivalidation.ValidateNameFunc) {
		for _, msg := range rule(value, false) {
			errs = append(errs, field.Invalid(p, value, msg))
		}
	}
	uid := func(p *field.Path, value string) {
		switch {
		case value == "":
			errs = append(errs, field.Invalid(p, value, "must not be empty"))
		case len(value) > 128:
			errs = append(errs, field.TooLong(p, value, 128))
		}
	}
	name(pcrSpec.Child("podName"), r.Spec.PodName, DNSSubdomain)
	uid(pcrSpec.Child("podUID"), string(r.Spec.PodUID))
	name(pcrSpec.Child("serviceAccountName"), r.Spec.ServiceAccountName, DNSSubdomain)
	uid(pcrSpec.Child("serviceAccountUID"), string(r.Spec.ServiceAccountUID))
	name(pcrSpec.Child("nodeName"), string(r.Spec.NodeName), DNSSubdomain)
	uid(pcrSpec.Child("nodeUID"), string(r.Spec.NodeUID))

	exp := r.Spec.MaxExpirationSeconds
	if exp == nil {
		return append(errs, field.Required(pcrSpec.Child("maxExpirationSeconds"), "must be set"))
	}
	if most := MaxExpirationFor(r.Spec.SignerName); *exp < MinMaxExpirationSeconds || *exp > most {
		errs = append(errs, field.Invalid(pcrSpec.Child("maxExpirationSeconds"), *exp, fmt.Sprintf("must be in the range [%d, %d]", MinMaxExpirationSeconds, most)))
	}
	return append(errs, stubPKCS10Request(r.Spec.StubPKCS10Request)...)
}

func stubPKCS10Request(der []byte) field.ErrorList {
	if len(der) == 0 {
		return field.ErrorList{field.Invalid(pcrSpec, field.OmitValueType{}, "exactly one of (stubPKCS10Request) or (pkixPublicKey, proofOfPossession) must be set")}
	}
	if len(der) > maxStubPKCS10RequestSize {
		return field.ErrorList{field.TooLong(pkcs10Path, der, maxStubPKCS10RequestSize)}
	}
	req, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return field.ErrorList{field.Invalid(pkcs10Path, field.OmitValueType{}, "must be a valid PKCS#10 CSR")}
	}
	switch pub := req.PublicKey.(type) {
	case ed25519.PublicKey:
	case *ecdsa.PublicKey:
		if c := pub.Curve; c != elliptic.P256() && c != elliptic.P384() && c != elliptic.P521() {
			return field.ErrorList{field.Invalid(pkcs10Path, "curve "+c.Params().Name, "elliptic public keys must use curve P256, P384, or P521")}
		}
	case *rsa.PublicKey:
		if bits := pub.Size() * 8; bits != 3072 && bits != 4096 {
			return field.ErrorList{field.Invalid(pkcs10Path, fmt.Sprintf("%d-bit modulus", bits), "RSA keys must have modulus size 3072 or 4096")}
		}
	default:
		return field.ErrorList{field.Invalid(pkcs10Path, field.OmitValueType{}, "unknown public key type; supported types are Ed25519, ECDSA, and RSA")}
	}
	// The request's contents are the signer's business (the agent sends an empty one); its
	// signature is the proof of possession.
	if err := req.CheckSignature(); err != nil {
		return field.ErrorList{field.Invalid(pkcs10Path, field.OmitValueType{}, "invalid signature")}
	}
	return nil
}

// PodCertificateRequestUpdate checks an update of the main resource: only metadata changes.
func PodCertificateRequestUpdate(r, old *certificatesv1.PodCertificateRequest) field.ErrorList {
	errs := ObjectMetaUpdate(&r.ObjectMeta, &old.ObjectMeta)
	if !apiequality.Semantic.DeepEqual(r.Spec, old.Spec) {
		errs = append(errs, field.Invalid(pcrSpec, field.OmitValueType{}, "field is immutable"))
	}
	return errs
}

func pcrCondition(r *certificatesv1.PodCertificateRequest, t string) bool {
	for _, c := range r.Status.Conditions {
		if c.Type == t && c.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}

func pcrTerminal(r *certificatesv1.PodCertificateRequest) bool {
	return pcrCondition(r, certificatesv1.PodCertificateRequestConditionTypeIssued) ||
		pcrCondition(r, certificatesv1.PodCertificateRequestConditionTypeDenied) ||
		pcrCondition(r, certificatesv1.PodCertificateRequestConditionTypeFailed)
}

// PodCertificateRequestStatus checks a signer's status update as upstream does: one of
// Issued, Denied or Failed, once (the status never changes after); a denial or failure
// carries nothing but its condition; an issued chain is PEM certificates whose leaf was issued
// to the requested key, with notBefore within 5 minutes of now, a lifetime of at least an
// hour and at most spec.maxExpirationSeconds, and a refresh time at least 10 minutes from
// either end.
func PodCertificateRequestStatus(r, old *certificatesv1.PodCertificateRequest, now time.Time) field.ErrorList {
	errs := ObjectMetaUpdate(&r.ObjectMeta, &old.ObjectMeta)
	if len(errs) > 0 {
		return errs
	}
	conds := field.NewPath("status", "conditions")
	known := []string{certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed}
	n := 0
	for i, c := range r.Status.Conditions {
		switch c.Type {
		case known[0], known[1], known[2]:
			if n++; n > 1 {
				errs = append(errs, field.Invalid(conds.Index(i).Child("type"), c.Type, `There may be at most one condition with type "Issued", "Denied", or "Failed"`))
			}
			if c.Status != metav1.ConditionTrue {
				errs = append(errs, field.NotSupported(conds.Index(i).Child("status"), c.Status, []metav1.ConditionStatus{metav1.ConditionTrue}))
			}
		default:
			errs = append(errs, field.NotSupported(conds.Index(i).Child("type"), c.Type, known))
		}
	}
	errs = append(errs, metav1validation.ValidateConditions(r.Status.Conditions, conds)...)
	if len(errs) > 0 {
		return errs
	}
	status := field.NewPath("status")
	switch {
	case pcrTerminal(old):
		if !apiequality.Semantic.DeepEqual(r.Status, old.Status) {
			errs = append(errs, field.Invalid(status, field.OmitValueType{}, "immutable after PodCertificateRequest is issued, denied, or failed"))
		}
		return errs
	case pcrCondition(r, known[1]) || pcrCondition(r, known[2]):
		if !apiequality.Semantic.DeepEqual(r.Status, certificatesv1.PodCertificateRequestStatus{Conditions: r.Status.Conditions}) {
			errs = append(errs, field.Invalid(status, field.OmitValueType{}, "non-condition status fields must be empty when denying or failing the PodCertificateRequest"))
		}
		return errs
	case pcrCondition(r, known[0]):
		return issuedChain(r, old, now)
	}
	if !apiequality.Semantic.DeepEqual(r.Status, old.Status) {
		errs = append(errs, field.Invalid(status, field.OmitValueType{}, `status is immutable unless transitioning to "Issued", "Denied", or "Failed"`))
	}
	return errs
}

func issuedChain(r, old *certificatesv1.PodCertificateRequest, now time.Time) field.ErrorList {
	s := r.Status
	invalid := func(p *field.Path, v any, msg string) field.ErrorList {
		return field.ErrorList{field.Invalid(p, v, msg)}
	}
	if len(s.CertificateChain) > maxCertificateChainSize {
		return field.ErrorList{field.TooLong(chainPath, "", maxCertificateChainSize)}
	}
	leafBlock, rest := pem.Decode([]byte(s.CertificateChain))
	if leafBlock == nil {
		return invalid(chainPath, "<chain>", "issued certificate chain must contain at least one certificate")
	}
	if leafBlock.Type != "CERTIFICATE" {
		return invalid(chainPath, "<chain>", "issued certificate chain must consist entirely of CERTIFICATE PEM blocks")
	}
	leaf, err := x509.ParseCertificate(leafBlock.Bytes)
	if err != nil {
		return invalid(chainPath, "<chain>", "leaf certificate does not parse as valid X.509")
	}
	var errs field.ErrorList
	for _, d := range leaf.DNSNames {
		switch {
		case d == "":
			errs = append(errs, field.Invalid(chainPath, d, "leaf certificate should not contain empty DNSName"))
		case strings.Contains(d, ".."):
			errs = append(errs, field.Invalid(chainPath, d, "leaf certificate's DNSName should not contain '..'"))
		case strings.HasPrefix(d, ".") || strings.HasSuffix(d, "."):
			errs = append(errs, field.Invalid(chainPath, d, "leaf certificate's DNSName should not start or end with '.'"))
		}
	}
	for _, e := range leaf.EmailAddresses {
		if _, err := mail.ParseAddress(e); err != nil {
			errs = append(errs, field.Invalid(chainPath, e, "leaf certificate should not contain invalid EmailAddress"))
		}
	}
	req, err := x509.ParseCertificateRequest(old.Spec.StubPKCS10Request)
	if err != nil {
		return append(errs, field.Invalid(pkcs10Path, field.OmitValueType{}, "must be a valid PKCS#10 CSR"))
	}
	if pub, ok := req.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(leaf.PublicKey) {
		return append(errs, field.Invalid(chainPath, "<chain>", "leaf certificate was not issued to the requested public key"))
	}
	if s.NotBefore == nil {
		errs = append(errs, field.Required(notBeforePath, "must be present and consistent with the issued certificate"))
	}
	if s.NotAfter == nil {
		errs = append(errs, field.Required(notAfterPath, "must be present and consistent with the issued certificate"))
	}
	if s.BeginRefreshAt == nil {
		errs = append(errs, field.Required(refreshPath, "must be present and in the range [notbefore+10min, notafter-10min]"))
	}
	if len(errs) > 0 {
		return errs
	}
	switch lifetime := leaf.NotAfter.Sub(leaf.NotBefore); {
	case !s.NotBefore.Time.Equal(leaf.NotBefore):
		return invalid(notBeforePath, s.NotBefore.Time, "must be set to the NotBefore time encoded in the leaf certificate")
	case s.NotBefore.Time.Sub(now).Abs() > 5*time.Minute:
		return invalid(notBeforePath, s.NotBefore.Time, "must be set to within 5 minutes of kube-apiserver's current time")
	case !s.NotAfter.Time.Equal(leaf.NotAfter):
		return invalid(notAfterPath, s.NotAfter.Time, "must be set to the NotAfter time encoded in the leaf certificate")
	case lifetime < time.Hour:
		return invalid(chainPath, lifetime, "leaf certificate lifetime must be >= 1 hour")
	case r.Spec.MaxExpirationSeconds != nil && lifetime > time.Duration(*r.Spec.MaxExpirationSeconds)*time.Second:
		return invalid(chainPath, lifetime, fmt.Sprintf("leaf certificate lifetime must be <= spec.maxExpirationSeconds (%v)", *r.Spec.MaxExpirationSeconds))
	case s.BeginRefreshAt.Time.Before(s.NotBefore.Time.Add(10 * time.Minute)):
		return invalid(refreshPath, s.BeginRefreshAt.Time, "must be at least 10 minutes after status.notBefore")
	case s.BeginRefreshAt.Time.After(s.NotAfter.Time.Add(-10 * time.Minute)):
		return invalid(refreshPath, s.BeginRefreshAt.Time, "must be at least 10 minutes before status.notAfter")
	}
	// The rest of the chain: certificates (Go's verifier will not check a partial chain).
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return nil
		}
		if b.Type != "CERTIFICATE" {
			return invalid(chainPath, "<chain>", "issued certificate chain must consist entirely of CERTIFICATE PEM blocks")
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return invalid(chainPath, "<chain>", "intermediate certificate does not parse as valid X.509")
		}
	}
}

// UserAnnotations checks annotations a pod passes to a signer: domain-prefixed keys (any
// case) within the size limit of annotations.
func UserAnnotations(a map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for k := range a {
		errs = append(errs, validation.IsDomainPrefixedKey(p, strings.ToLower(k))...)
	}
	if err := apivalidation.ValidateAnnotationsSize(a); err != nil {
		errs = append(errs, field.TooLong(p, "", apivalidation.TotalAnnotationSizeLimitB))
	}
	return errs
}

// projectedVolume checks what upstream checks of a projected volume's clusterTrustBundle and
// podCertificate sources (their names, signers, selectors, key types, lifetimes and paths),
// and that each source is one kind; the other kinds' contents are checked where they are
// read.
func projectedVolume(v *corev1.ProjectedVolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m := v.DefaultMode; m != nil && (*m > 0o777 || *m < 0) {
		errs = append(errs, field.Invalid(p.Child("defaultMode"), *m, "must be a number between 0 and 0777 (octal), both inclusive"))
	}
	paths := map[string]bool{}
	path := func(pp *field.Path, value string) {
		if value == "" {
			return
		}
		errs = append(errs, localPath(value, pp)...)
		if paths[value] {
			errs = append(errs, field.Invalid(p.Child("sources"), value, "conflicting duplicate paths"))
		}
		paths[value] = true
	}
	for i, src := range v.Sources {
		sp := p.Child("sources").Index(i)
		kinds := 0
		for _, set := range []bool{src.Secret != nil, src.ConfigMap != nil, src.DownwardAPI != nil, src.ServiceAccountToken != nil, src.ClusterTrustBundle != nil, src.PodCertificate != nil} {
			if set {
				kinds++
			}
		}
		if kinds > 1 {
			errs = append(errs, field.Forbidden(sp, "may not specify more than 1 volume type per source"))
		}
		if ctb := src.ClusterTrustBundle; ctb != nil {
			cp := sp.Child("clusterTrustBundle")
			switch {
			case ctb.Name != nil && ctb.SignerName != nil:
				errs = append(errs, field.Invalid(cp, "<source>", "only one of name and signerName may be used"))
			case ctb.Name != nil:
				if *ctb.Name == "" {
					errs = append(errs, field.Required(cp.Child("name"), "must be a valid object name"))
				}
				// A name with a ":" is a signer-linked bundle's: "<signer with / as :>:<rest>".
				signer := ""
				if i := strings.LastIndex(*ctb.Name, ":"); i >= 0 {
					signer = strings.ReplaceAll((*ctb.Name)[:i], ":", "/")
				}
				for _, msg := range trustBundleName(signer)(*ctb.Name, false) {
					errs = append(errs, field.Invalid(cp.Child("name"), *ctb.Name, "not a valid clustertrustbundlename: "+msg))
				}
				if ctb.LabelSelector != nil {
					errs = append(errs, field.Invalid(cp.Child("labelSelector"), "<selector>", "labelSelector must be unset if name is specified"))
				}
			case ctb.SignerName != nil:
				errs = append(errs, signerName(*ctb.SignerName, cp.Child("signerName"))...)
				errs = append(errs, metav1validation.ValidateLabelSelector(ctb.LabelSelector, metav1validation.LabelSelectorValidationOptions{}, cp.Child("labelSelector"))...)
			default:
				errs = append(errs, field.Required(cp, "either name or signerName must be specified"))
			}
			if ctb.Path == "" {
				errs = append(errs, field.Required(cp.Child("path"), ""))
			}
			path(cp.Child("path"), ctb.Path)
		}
		if pc := src.PodCertificate; pc != nil {
			pp := sp.Child("podCertificate")
			errs = append(errs, signerName(pc.SignerName, pp.Child("signerName"))...)
			if pc.UserAnnotations != nil {
				errs = append(errs, UserAnnotations(pc.UserAnnotations, pp.Child("userAnnotations"))...)
			}
			if !slices.Contains(PodCertificateKeyTypes, pc.KeyType) {
				errs = append(errs, field.NotSupported(pp.Child("keyType"), pc.KeyType, PodCertificateKeyTypes))
			}
			if exp := pc.MaxExpirationSeconds; exp != nil {
				if *exp < MinMaxExpirationSeconds {
					errs = append(errs, field.Invalid(pp.Child("maxExpirationSeconds"), *exp, fmt.Sprintf("if provided, maxExpirationSeconds must be >= %d", MinMaxExpirationSeconds)))
				}
				if most := MaxExpirationFor(pc.SignerName); *exp > most {
					errs = append(errs, field.Invalid(pp.Child("maxExpirationSeconds"), *exp, fmt.Sprintf("if provided, maxExpirationSeconds must be <= %d", most)))
				}
			}
			if pc.CredentialBundlePath == "" && pc.KeyPath == "" && pc.CertificateChainPath == "" {
				errs = append(errs, field.Required(pp, "specify at least one of credentialBundlePath, keyPath, and certificateChainPath"))
			}
			path(pp.Child("credentialBundlePath"), pc.CredentialBundlePath)
			path(pp.Child("keyPath"), pc.KeyPath)
			path(pp.Child("certificateChainPath"), pc.CertificateChainPath)
		}
	}
	return errs
}

// localPath is upstream's rule for a file a volume writes: relative, no "..", not
// beginning with "..".
func localPath(p string, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.HasPrefix(p, "/") {
		errs = append(errs, field.Invalid(fp, p, "must be a relative path"))
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			errs = append(errs, field.Invalid(fp, p, "must not contain '..'"))
			break
		}
	}
	if strings.HasPrefix(p, "..") {
		errs = append(errs, field.Invalid(fp, p, "must not start with '..'"))
	}
	return errs
}
