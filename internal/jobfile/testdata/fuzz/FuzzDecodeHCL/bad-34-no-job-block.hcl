go test fuzz v1
[]byte("jobb \"web\" {\n  group \"api\" {}\n}\n")
