package cri

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podlab/podlab/steps/cni"
)

// Version names the runtime and the CRI version it speaks.
func (s *Server) Version(ctx context.Context, req *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: Name, RuntimeVersion: Version, RuntimeApiVersion: APIVersion}, nil
}

// Status is RuntimeReady (always, once serving) and NetworkReady: ready
// when the node's CNI configuration exists, else false with containerd's
// reason, NetworkPluginNotReady, and where the configuration is missing.
func (s *Server) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	netCond := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: true}
	if !s.network.Configured() {
		netCond.Status = false
		netCond.Reason = "NetworkPluginNotReady"
		netCond.Message = "Network plugin returns error: cni plugin not initialized: no network configuration in " +
			s.node.CNIConfDir() + " (UpdateRuntimeConfig with the node's pod CIDR writes one)"
	}
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, netCond}},
		RuntimeHandlers: []*runtimeapi.RuntimeHandler{
			{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{}},
			{Name: "runc", Features: &runtimeapi.RuntimeHandlerFeatures{}},
		}}
	if req.Verbose {
		b, _ := json.Marshal(map[string]any{"node": s.node.Name, "socket": s.node.CRISocket(), "records": s.node.CRIDir(),
			"contentStore": s.store.Dir(), "runc": s.cfg.Runtime, "runcRoot": s.rt.RootDir(), "cniConfDir": s.node.CNIConfDir(),
			"streamServer": s.StreamURL(), "registryConfigPath": s.hostsDir(), "registryMirror": s.cfg.Mirror, "insecure": s.cfg.Insecure})
		resp.Info = map[string]string{"config": string(b)}
	}
	return resp, nil
}

// UpdateRuntimeConfig takes the node's pod CIDR and renders the network
// configuration from it (steps/cni), as containerd renders its
// conf_template.
func (s *Server) UpdateRuntimeConfig(ctx context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	cidr := req.GetRuntimeConfig().GetNetworkConfig().GetPodCidr()
	if cidr == "" {
		return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
	}
	path, changed, err := cni.WriteConfList(s.node.CNIConfDir(), cni.Template{
		PodCIDR: cidr, Bridge: s.node.BridgeName(), DataDir: s.node.CNIIPAMDir()})
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "pod CIDR %q: %v", cidr, err)
	}
	if changed {
		s.note("pod CIDR %s: wrote the network configuration %s", cidr, path)
	}
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}
