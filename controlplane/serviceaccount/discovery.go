package serviceaccount

import (
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"k8s.io/client-go/util/keyutil"
)

// Paths of the OpenID Connect discovery document and key set, as kube-apiserver serves them.
const (
	OpenIDConfigurationPath = "/.well-known/openid-configuration"
	JWKSPath                = "/openid/v1/jwks"
)

// Discovery returns the OIDC discovery document and the JSON Web Key Set that let anyone
// verify service-account tokens offline (ServiceAccountIssuerDiscovery): the issuer, where
// the keys are (jwksURI), and the public keys in pubFile with upstream's key IDs.
func Discovery(issuer, jwksURI, pubFile string) (config, jwks []byte, err error) {
	keys, err := keyutil.PublicKeysFromFile(pubFile)
	if err != nil {
		return nil, nil, err
	}
	type jwk struct {
		Kty string `json:"kty"`
		Crv string `json:"crv"`
		X   string `json:"x"`
		Y   string `json:"y"`
		Kid string `json:"kid"`
		Use string `json:"use"`
		Alg string `json:"alg"`
	}
	set := struct {
		Keys []jwk `json:"keys"`
	}{Keys: []jwk{}}
	for _, k := range keys {
		ec, ok := k.(*ecdsa.PublicKey)
		if !ok || ec.Curve.Params().Name != "P-256" {
			return nil, nil, fmt.Errorf("%s: only ECDSA P-256 keys are supported, got %T", pubFile, k)
		}
		kid, err := keyID(ec)
		if err != nil {
			return nil, nil, err
		}
		size := (ec.Curve.Params().BitSize + 7) / 8
		enc := func(b []byte) string {
			padded := make([]byte, size)
			copy(padded[size-len(b):], b)
			return base64.RawURLEncoding.EncodeToString(padded)
		}
		set.Keys = append(set.Keys, jwk{Kty: "EC", Crv: "P-256", X: enc(ec.X.Bytes()), Y: enc(ec.Y.Bytes()), Kid: kid, Use: "sig", Alg: "ES256"})
	}
	config, err = json.Marshal(map[string]any{
		"issuer":                                issuer,
		"jwks_uri":                              jwksURI,
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"ES256"},
	})
	if err != nil {
		return nil, nil, err
	}
	jwks, err = json.Marshal(set)
	return config, jwks, err
}
