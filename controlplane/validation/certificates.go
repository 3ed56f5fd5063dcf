package validation

import (
	"crypto/x509"
	"encoding/pem"
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
