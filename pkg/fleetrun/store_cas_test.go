package fleetrun

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/aws/smithy-go"
	"google.golang.org/api/googleapi"
)

func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&smithy.GenericAPIError{Code: "ConditionalRequestConflict"}, true},
		{&smithy.GenericAPIError{Code: "SlowDown"}, true},
		{&smithy.GenericAPIError{Code: "InternalError"}, true},
		{&smithy.GenericAPIError{Code: "PreconditionFailed"}, false},
		{&smithy.GenericAPIError{Code: "AccessDenied"}, false},
		{&googleapi.Error{Code: 503}, true},
		{&googleapi.Error{Code: 429}, true},
		{&googleapi.Error{Code: 412}, false},
		{&azcore.ResponseError{StatusCode: 500}, true},
		{&azcore.ResponseError{StatusCode: 409}, false},
		{&net.DNSError{Err: "i/o timeout", IsTimeout: true}, true},
		{fmt.Errorf("reading: %w", errTornRead), true},
		{fmt.Errorf("k: %w", ErrConflict), false},
		{fmt.Errorf("k: %w", ErrNotFound), false},
		{errors.New("bad store key"), false},
	} {
		if got := Transient(c.err); got != c.want {
			t.Errorf("Transient(%T %v) = %v, want %v", c.err, c.err, got, c.want)
		}
	}
}
