go test fuzz v1
[]byte("job \"web\" {\n  group \"api\" {\n    count = 1\n    count = 2\n    task \"server\" {\n      driver = \"exec\"\n      config { command = \"/bin/sleep\" }\n      resources { cpu = 100 }\n      resources { memory = 64 }\n    }\n  }\n}\n")
