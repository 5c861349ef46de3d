// Wrapper module that builds a command around github.com/oauth2-proxy/mockoidc, the OIDC
// provider oauth2-proxy signs people in with in the tests (loopback only).
// Built by `python -m swarmkit_devcluster oauth2-proxy`.
module github.com/swarmkit-operator/hack/mockoidc

go 1.26.0

require github.com/oauth2-proxy/mockoidc v0.0.0-20261103160011-e06ed0b7cb7f

require (
	github.com/go-jose/go-jose/v4 v4.1.8 // indirect
	github.com/golang-jwt/jwt/v5 v5.2.0 // indirect
)
