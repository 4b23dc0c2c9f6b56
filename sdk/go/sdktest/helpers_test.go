package sdktest_test

import (
	"github.com/idemdb/idem/code"
	"github.com/idemdb/idem/sdk/go/idemapi"
)

func idemCode(c code.Code) idemapi.ErrorCode { return idemapi.ErrorCode(c) }
