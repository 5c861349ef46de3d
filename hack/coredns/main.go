// The real node's cluster DNS (issue 38): CoreDNS v1.15.0 from the Go module proxy, built with
// only the plugins a cluster DNS without upstream needs. The local cluster's pods must never
// reach the host's resolver, so there is no `forward`: names outside cluster.local are refused.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The plugins' execution order, as CoreDNS's generated list orders them.
func init() {
	dnsserver.Directives = []string{
		"ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes",
	}
}

func main() {
	coremain.Run()
}
