package volumes

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// trustBundleProjection writes the trust anchors a clusterTrustBundle source selects: one
// ClusterTrustBundle by name, or every bundle of a signer whose labels match the selector (a
// nil selector matches none, an empty one all, as the API documents). Nothing found is an
// empty file if the source is optional and an error otherwise, so the pod does not start.
func (m *Manager) trustBundleProjection(ctx context.Context, p *corev1.ClusterTrustBundleProjection, mode int32, own ownership) (map[string]projection, error) {
	optional := isOptional(p.Optional)
	var bundles []string
	switch {
	case p.Name != nil:
		ctb, err := m.client.CertificatesV1().ClusterTrustBundles().Get(ctx, *p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && optional:
		case err != nil:
			return nil, fmt.Errorf("clustertrustbundle %q: %w", *p.Name, err)
		default:
			bundles = append(bundles, ctb.Spec.TrustBundle)
		}
	case p.SignerName != nil:
		found, err := m.signerBundles(ctx, *p.SignerName, p.LabelSelector)
		if err != nil {
			return nil, err
		}
		if len(found) == 0 && !optional {
			return nil, fmt.Errorf("clustertrustbundles of signer %q: combination of signerName and labelSelector matched zero ClusterTrustBundles", *p.SignerName)
		}
		bundles = found
	default:
		return nil, errors.New("clustertrustbundle source names neither a bundle nor a signer")
	}
	return map[string]projection{p.Path: ownedProjection(trustAnchors(bundles), mode, own)}, nil
}

// signerBundles lists the trust bundles of signer that selector matches.
func (m *Manager) signerBundles(ctx context.Context, signer string, selector *metav1.LabelSelector) ([]string, error) {
	if selector == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("clustertrustbundles of signer %q: label selector: %w", signer, err)
	}
	list, err := m.client.CertificatesV1().ClusterTrustBundles().List(ctx, metav1.ListOptions{
		LabelSelector: sel.String(), FieldSelector: fields.OneTermEqualSelector("spec.signerName", signer).String()})
	if err != nil {
		return nil, fmt.Errorf("clustertrustbundles of signer %q: %w", signer, err)
	}
	var out []string
	for _, ctb := range list.Items {
		if ctb.Spec.SignerName == signer { // the selector is the server's; the signer check is ours too
			out = append(out, ctb.Spec.TrustBundle)
		}
	}
	return out, nil
}

// trustAnchors merges bundles into one PEM file: every certificate once, re-encoded without
// what surrounded it in its bundle, sorted so the file changes only when the set does.
func trustAnchors(bundles []string) []byte {
	var ders [][]byte
	for _, b := range bundles {
		ders = append(ders, certificateDERs(b)...)
	}
	slices.SortFunc(ders, bytes.Compare)
	return encodeCertificates(slices.CompactFunc(ders, bytes.Equal))
}

// certificateDERs is the DER of each PEM block in s, in order, whatever lies between them;
// the API server has checked that they are certificates.
func certificateDERs(s string) [][]byte {
	var ders [][]byte
	rest := []byte(s)
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return ders
		}
		ders = append(ders, block.Bytes)
	}
}

// encodeCertificates writes each DER as a bare CERTIFICATE block.
func encodeCertificates(ders [][]byte) []byte {
	var out []byte
	for _, der := range ders {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return out
}
