//go:build tools

// Package tools pins the Jaeger binary this module builds.
package tools

import _ "github.com/jaegertracing/jaeger/cmd/jaeger"
