go test fuzz v1
[]byte("job \"web\" {\n  group \"api\" {\n    task \"server\" {\n      driver = \"exec\"\n      config { command = \"/bin/sleep\" }\n    }\n  }\n  group \"api\" {\n    task \"server\" {\n      driver = \"exec\"\n      config { command = \"/bin/sleep\" }\n    }\n  }\n}\n")
