go test fuzz v1
[]byte("job \"web\" {\n  group \"api\" {\n    count = 3 4\n    task \"server\" {\n      driver = \"exec\"\n    }\n  }\n")
