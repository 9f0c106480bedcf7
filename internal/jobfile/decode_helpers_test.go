package jobfile

import "github.com/drover-org/drover/internal/spec"

// The tests' short forms of DecodeWith and DecodeFileWith, without
// variables, with and without the warnings.

func Decode(filename string, src []byte) (*spec.Job, error) {
	job, _, err := DecodeWarn(filename, src)
	return job, err
}

func DecodeWarn(filename string, src []byte) (*spec.Job, spec.Problems, error) {
	return DecodeWith(filename, src, Options{})
}

func DecodeFile(path string) (*spec.Job, error) {
	job, _, err := DecodeFileWarn(path)
	return job, err
}

func DecodeFileWarn(path string) (*spec.Job, spec.Problems, error) {
	return DecodeFileWith(path, Options{})
}
