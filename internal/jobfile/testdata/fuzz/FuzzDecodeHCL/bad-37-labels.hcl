go test fuzz v1
[]byte("job \"web\" \"extra\" {\n  group {\n    restart \"policy\" {\n      attempts = 1\n      interval = \"1m\"\n    }\n    task \"a\" \"b\" {\n      driver = \"exec\"\n      config { command = \"/bin/sleep\" }\n    }\n  }\n}\n")
