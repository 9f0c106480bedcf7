package jobfile

import (
	"fmt"

	"github.com/hashicorp/go-cty-funcs/cidr"
	"github.com/hashicorp/go-cty-funcs/crypto"
	"github.com/hashicorp/go-cty-funcs/encoding"
	"github.com/hashicorp/go-cty-funcs/filesystem"
	"github.com/hashicorp/go-cty-funcs/uuid"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	ctyyaml "github.com/zclconf/go-cty-yaml"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// functions are the functions an HCL job file may call: the ones Nomad's
// job language documents, by the same names, each from a library (go-cty's
// stdlib, HCL's extensions, HashiCorp's go-cty-funcs, go-cty-yaml). The
// filesystem functions read paths relative to dir, the job file's folder,
// or, with noFiles, refuse (noFile).
func functions(dir string, noFiles bool) map[string]function.Function {
	fs := map[string]function.Function{
		// strings
		"chomp": stdlib.ChompFunc, "format": stdlib.FormatFunc, "formatlist": stdlib.FormatListFunc,
		"indent": stdlib.IndentFunc, "join": stdlib.JoinFunc, "lower": stdlib.LowerFunc,
		"regex_replace": stdlib.RegexReplaceFunc, "replace": stdlib.ReplaceFunc, "split": stdlib.SplitFunc,
		"strlen": stdlib.StrlenFunc, "strrev": stdlib.ReverseFunc, "substr": stdlib.SubstrFunc,
		"title": stdlib.TitleFunc, "trim": stdlib.TrimFunc, "trimprefix": stdlib.TrimPrefixFunc,
		"trimsuffix": stdlib.TrimSuffixFunc, "trimspace": stdlib.TrimSpaceFunc, "upper": stdlib.UpperFunc,
		// numbers
		"abs": stdlib.AbsoluteFunc, "ceil": stdlib.CeilFunc, "floor": stdlib.FloorFunc, "log": stdlib.LogFunc,
		"max": stdlib.MaxFunc, "min": stdlib.MinFunc, "parseint": stdlib.ParseIntFunc, "pow": stdlib.PowFunc,
		"signum": stdlib.SignumFunc,
		// collections
		"chunklist": stdlib.ChunklistFunc, "coalesce": stdlib.CoalesceFunc, "coalescelist": stdlib.CoalesceListFunc,
		"compact": stdlib.CompactFunc, "concat": stdlib.ConcatFunc, "contains": stdlib.ContainsFunc,
		"distinct": stdlib.DistinctFunc, "element": stdlib.ElementFunc, "flatten": stdlib.FlattenFunc,
		"index": stdlib.IndexFunc, "keys": stdlib.KeysFunc, "length": stdlib.LengthFunc,
		"lookup": stdlib.LookupFunc, "merge": stdlib.MergeFunc, "range": stdlib.RangeFunc,
		"reverse": stdlib.ReverseListFunc, "setintersection": stdlib.SetIntersectionFunc,
		"setproduct": stdlib.SetProductFunc, "setunion": stdlib.SetUnionFunc, "slice": stdlib.SliceFunc,
		"sort": stdlib.SortFunc, "values": stdlib.ValuesFunc, "zipmap": stdlib.ZipmapFunc,
		// encoding
		"base64decode": encoding.Base64DecodeFunc, "base64encode": encoding.Base64EncodeFunc,
		"csvdecode": stdlib.CSVDecodeFunc, "jsondecode": stdlib.JSONDecodeFunc, "jsonencode": stdlib.JSONEncodeFunc,
		"urlencode": encoding.URLEncodeFunc, "yamldecode": ctyyaml.YAMLDecodeFunc, "yamlencode": ctyyaml.YAMLEncodeFunc,
		// filesystem, relative to the job file
		"abspath": filesystem.AbsPathFunc, "basename": filesystem.BasenameFunc, "dirname": filesystem.DirnameFunc,
		"file": filesystem.MakeFileFunc(dir, false), "filebase64": filesystem.MakeFileFunc(dir, true),
		"fileexists": filesystem.MakeFileExistsFunc(dir), "fileset": filesystem.MakeFileSetFunc(dir),
		"pathexpand": filesystem.PathExpandFunc,
		// date and time
		"formatdate": stdlib.FormatDateFunc, "timeadd": stdlib.TimeAddFunc,
		// hashes and crypto
		"bcrypt": crypto.BcryptFunc, "md5": crypto.Md5Func, "rsadecrypt": crypto.RsaDecryptFunc,
		"sha1": crypto.Sha1Func, "sha256": crypto.Sha256Func, "sha512": crypto.Sha512Func,
		"uuidv4": uuid.V4Func, "uuidv5": uuid.V5Func,
		// IP networks
		"cidrhost": cidr.HostFunc, "cidrnetmask": cidr.NetmaskFunc, "cidrsubnet": cidr.SubnetFunc,
		"cidrsubnets": cidr.SubnetsFunc,
		// types
		"can": tryfunc.CanFunc, "convert": typeexpr.ConvertFunc, "try": tryfunc.TryFunc,
	}
	if noFiles {
		for _, name := range []string{"file", "filebase64", "fileexists", "fileset"} {
			fs[name] = noFile(name)
		}
	}
	return fs
}

// noFile is a filesystem function of a job whose source has no files
// beside it (Options.NoFiles): calling it is an error that says so.
func noFile(name string) function.Function {
	return function.New(&function.Spec{
		VarParam: &function.Parameter{Name: "args", Type: cty.DynamicPseudoType, AllowNull: true, AllowUnknown: true, AllowDynamicType: true},
		Type: func([]cty.Value) (cty.Type, error) {
			return cty.NilType, fmt.Errorf("%s() reads a file beside the job file, and this job came without files (from the web UI): write the value into the job, or submit the file with drover run", name)
		},
	})
}
