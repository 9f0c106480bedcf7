package registry

import (
	"context"
	"path"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
)

// RequestSeconds is the latency of this process's unary requests to etcd,
// by method (Range, Txn, Put, LeaseGrant, ...): a bounded label. Servers
// export it with their metrics (GET /metrics).
var RequestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "drover_etcd_request_seconds",
	Help:    "Latency of requests to etcd, by method.",
	Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
}, []string{"method"})

// timeRequests observes every unary etcd request in RequestSeconds.
func timeRequests(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	RequestSeconds.WithLabelValues(path.Base(method)).Observe(time.Since(start).Seconds())
	return err
}
