package validation

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	keyUsages = sets.New(
		certificatesv1.UsageSigning, certificatesv1.UsageDigitalSignature, certificatesv1.UsageContentCommitment,
		certificatesv1.UsageKeyEncipherment, certificatesv1.UsageKeyAgreement, certificatesv1.UsageDataEncipherment,
		certificatesv1.UsageCertSign, certificatesv1.UsageCRLSign, certificatesv1.UsageEncipherOnly,
		certificatesv1.UsageDecipherOnly, certificatesv1.UsageAny, certificatesv1.UsageServerAuth,
		certificatesv1.UsageClientAuth, certificatesv1.UsageCodeSigning, certificatesv1.UsageEmailProtection,
		certificatesv1.UsageSMIME, certificatesv1.UsageIPsecEndSystem, certificatesv1.UsageIPsecTunnel,
		certificatesv1.UsageIPsecUser, certificatesv1.UsageTimestamping, certificatesv1.UsageOCSPSigning,
		certificatesv1.UsageMicrosoftSGC, certificatesv1.UsageNetscapeSGC)
	csrConditionTypes = sets.New(certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed)
	conditionStatuses = sets.New(corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown)
)

// minExpirationSeconds is upstream's floor for spec.expirationSeconds (10 minutes).
const minExpirationSeconds = 600

// CertificateSigningRequest validates a new CSR: a PEM "CERTIFICATE REQUEST" whose signature
// checks, a qualified signerName, known usages and a sane requested duration.
func CertificateSigningRequest(csr *certificatesv1.CertificateSigningRequest) field.ErrorList {
	errs := ObjectMeta(&csr.ObjectMeta, false, DNSSubdomain)
	spec := specPath
	if _, err := ParseCSR(csr.Spec.Request); err != nil {
		errs = append(errs, field.Invalid(spec.Child("request"), "<request>", err.Error()))
	}
	errs = append(errs, signerName(csr.Spec.SignerName, spec.Child("signerName"))...)
	if len(csr.Spec.Usages) == 0 {
		errs = append(errs, field.Required(spec.Child("usages"), "usages must be provided"))
	}
	seen := sets.New[certificatesv1.KeyUsage]()
	for i, u := range csr.Spec.Usages {
		p := spec.Child("usages").Index(i)
		switch {
		case !keyUsages.Has(u):
			errs = append(errs, field.NotSupported(p, u, sets.List(keyUsages)))
		case seen.Has(u):
			errs = append(errs, field.Duplicate(p, u))
		}
		seen.Insert(u)
	}
	if s := csr.Spec.ExpirationSeconds; s != nil && *s < minExpirationSeconds {
		errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *s, "may not specify a duration less than 600 seconds (10 minutes)"))
	}
	return append(errs, CSRStatus(csr)...)
}

// CSRUpdate checks an update of the main resource: the spec never changes.
func CSRUpdate(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	errs := ObjectMetaUpdate(&csr.ObjectMeta, &old.ObjectMeta)
	return append(errs, CSRStatus(csr)...)
}

// CSRStatus checks conditions (known types, no duplicates, Approved and Denied exclusive) and
// that a certificate, if set, is PEM with only CERTIFICATE blocks.
func CSRStatus(csr *certificatesv1.CertificateSigningRequest) field.ErrorList {
	var errs field.ErrorList
	conds := field.NewPath("status", "conditions")
	seen := map[certificatesv1.RequestConditionType]bool{}
	for i, c := range csr.Status.Conditions {
		p := conds.Index(i)
		if c.Type == "" {
			errs = append(errs, field.Required(p.Child("type"), ""))
		} else if seen[c.Type] && csrConditionTypes.Has(c.Type) {
			errs = append(errs, field.Duplicate(p.Child("type"), c.Type))
		}
		seen[c.Type] = true
		if !conditionStatuses.Has(c.Status) {
			errs = append(errs, field.NotSupported(p.Child("status"), c.Status, sets.List(conditionStatuses)))
		}
		if (c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied) && c.Status != corev1.ConditionTrue {
			errs = append(errs, field.NotSupported(p.Child("status"), c.Status, []corev1.ConditionStatus{corev1.ConditionTrue}))
		}
	}
	if seen[certificatesv1.CertificateApproved] && seen[certificatesv1.CertificateDenied] {
		errs = append(errs, field.Invalid(conds, certificatesv1.CertificateDenied, "Approved and Denied conditions are mutually exclusive"))
	}
	if len(csr.Status.Certificate) > 0 {
		if err := certificatePEM(csr.Status.Certificate); err != "" {
			errs = append(errs, field.Invalid(field.NewPath("status", "certificate"), "<certificate>", err))
		}
	}
	return errs
}

// ParseCSR decodes the single PEM "CERTIFICATE REQUEST" block and checks its signature.
func ParseCSR(data []byte) (*x509.CertificateRequest, error) {
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errString("PEM block type must be CERTIFICATE REQUEST")
	}
	if len(strings.TrimSpace(string(rest))) > 0 {
		return nil, errString("must contain exactly one PEM block")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, err
	}
	if err := req.CheckSignature(); err != nil {
		return nil, err
	}
	return req, nil
}

type errString string

func (e errString) Error() string { return string(e) }

func signerName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	domain, path, ok := strings.Cut(name, "/")
	if !ok || path == "" {
		return field.ErrorList{field.Invalid(p, name, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(domain) {
		errs = append(errs, field.Invalid(p, name, "the domain part: "+msg))
	}
	if len(name) > 571 {
		errs = append(errs, field.TooLong(p, name, 571))
	}
	return errs
}

func certificatePEM(data []byte) string {
	n := 0
	for {
		block, rest := pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return "only CERTIFICATE PEM blocks are allowed, found " + block.Type
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return err.Error()
		}
		n++
		data = rest
	}
	if n == 0 {
		return "must contain at least one CERTIFICATE PEM block"
	}
	if len(strings.TrimSpace(string(data))) > 0 {
		return "contains data that is not a PEM block"
	}
	return ""
}

// maxTrustBundleSize is upstream's limit on a ClusterTrustBundle's spec.trustBundle (1 MiB).
const maxTrustBundleSize = 1 << 20

// ClusterTrustBundle validates a trust bundle: a bundle linked to a signer is named
// "<signerName with / as :>:<name>" (so the name alone says whose anchors these are and
// RBAC can match them), an unlinked one has no ":" in its name; the bundle is PEM CA
// certificates, at least one, none twice.
func ClusterTrustBundle(b *certificatesv1.ClusterTrustBundle) field.ErrorList {
	errs := ObjectMeta(&b.ObjectMeta, false, trustBundleName(b.Spec.SignerName))
	if b.Spec.SignerName != "" {
		errs = append(errs, signerName(b.Spec.SignerName, specPath.Child("signerName"))...)
	}
	return append(errs, TrustBundlePEM(b.Spec.TrustBundle, specPath.Child("trustBundle"))...)
}

// ClusterTrustBundleUpdate checks an update: the signer never changes, and a bundle that
// did not change is not parsed again (a newer Go that parses X.509 more strictly must not
// make an old object unwritable, as upstream).
func ClusterTrustBundleUpdate(b, old *certificatesv1.ClusterTrustBundle) field.ErrorList {
	errs := ObjectMeta(&b.ObjectMeta, false, trustBundleName(b.Spec.SignerName))
	errs = append(errs, ObjectMetaUpdate(&b.ObjectMeta, &old.ObjectMeta)...)
	if b.Spec.SignerName != old.Spec.SignerName {
		errs = append(errs, field.Invalid(specPath.Child("signerName"), b.Spec.SignerName, "field is immutable"))
	} else if b.Spec.SignerName != "" {
		errs = append(errs, signerName(b.Spec.SignerName, specPath.Child("signerName"))...)
	}
	if b.Spec.TrustBundle != old.Spec.TrustBundle {
		errs = append(errs, TrustBundlePEM(b.Spec.TrustBundle, specPath.Child("trustBundle"))...)
	}
	return errs
}

// TrustBundleNamePrefix is the prefix the name of a bundle linked to signer must have.
func TrustBundleNamePrefix(signer string) string {
	return strings.ReplaceAll(signer, "/", ":") + ":"
}

func trustBundleName(signer string) func(name string, prefix bool) []string {
	return func(name string, prefix bool) []string {
		if signer == "" {
			if strings.Contains(name, ":") {
				return []string{`ClusterTrustBundle without signer name must not have ":" in its name`}
			}
			return DNSSubdomain(name, prefix)
		}
		want := TrustBundleNamePrefix(signer)
		if !strings.HasPrefix(name, want) {
			return []string{fmt.Sprintf("ClusterTrustBundle for signerName %s must begin with %q", signer, want)}
		}
		return DNSSubdomain(strings.TrimPrefix(name, want), prefix)
	}
}

// TrustBundlePEM checks a trust bundle: only CERTIFICATE blocks without headers, each an
// X.509 CA certificate with valid basic constraints, at least one, none repeated. The
// messages are upstream's, with each entry's index.
func TrustBundlePEM(bundle string, p *field.Path) field.ErrorList {
	if len(bundle) > maxTrustBundleSize {
		return field.ErrorList{field.TooLong(p, "", maxTrustBundleSize)}
	}
	var errs field.ErrorList
	invalid := func(format string, args ...any) {
		errs = append(errs, field.Invalid(p, "<value omitted>", fmt.Sprintf(format, args...)))
	}
	seen := map[string][]int{}
	var order []string
	rest := []byte(bundle)
	for i := 0; ; i++ {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			invalid("entry %d has bad block type: %v", i, b.Type)
			continue
		}
		if len(b.Headers) != 0 {
			invalid("entry %d has PEM block headers", i)
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		switch {
		case err != nil:
			invalid("entry %d does not parse as X.509", i)
			continue
		case !cert.IsCA:
			invalid("entry %d does not have the CA bit set", i)
			continue
		case !cert.BasicConstraintsValid:
			invalid("entry %d has invalid basic constraints", i)
			continue
		}
		if _, ok := seen[string(b.Bytes)]; !ok {
			order = append(order, string(b.Bytes))
		}
		seen[string(b.Bytes)] = append(seen[string(b.Bytes)], i)
	}
	// A malformed block says enough; duplicates or emptiness would only repeat it.
	if len(errs) != 0 {
		return errs
	}
	if len(order) == 0 {
		invalid("at least one trust anchor must be provided")
	}
	for _, der := range order {
		if idx := seen[der]; len(idx) > 1 {
			invalid("duplicate trust anchor (indices %v)", idx)
		}
	}
	return errs
}
