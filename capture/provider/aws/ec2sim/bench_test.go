package ec2sim

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// BenchmarkQueryAPI measures the simulator's throughput as the capture
// daemons of a test see it: 16 callers, each with its own SDK client, over
// loopback HTTP, half of the calls DescribeNetworkInterfaces by address and
// half AssignPrivateIpAddresses with reassignment, which moves an address
// between NICs on most calls. The target is 5,000 calls/s.
func BenchmarkQueryAPI(b *testing.B) {
	const callers = 16
	s, err := New(Config{NICs: nicIDs})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	// One connection per caller, kept: the SDK's clients reuse theirs.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: callers, MaxIdleConnsPerHost: callers}}
	defer hc.CloseIdleConnections()
	addrs := make([]string, 32)
	for i := range addrs {
		addrs[i] = netip.AddrFrom4([4]byte{10, 0, 0, byte(100 + i)}).String()
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range callers {
		c := sdkClient(srv.URL, hc)
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				a := addrs[i%len(addrs)]
				var err error
				if i%2 == 0 {
					_, err = c.DescribeNetworkInterfaces(b.Context(), &ec2.DescribeNetworkInterfacesInput{
						Filters: []types.Filter{{Name: aws.String("addresses.private-ip-address"), Values: []string{a}}},
					})
				} else {
					_, err = c.AssignPrivateIpAddresses(b.Context(), &ec2.AssignPrivateIpAddressesInput{
						NetworkInterfaceId: aws.String(nicIDs[(i/len(addrs))%len(nicIDs)]),
						PrivateIpAddresses: []string{a}, AllowReassignment: aws.Bool(true),
					})
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
	if moves := len(s.Mutations()); b.N > 1000 && moves == 0 {
		b.Fatal("no assign moved an address")
	}
}
