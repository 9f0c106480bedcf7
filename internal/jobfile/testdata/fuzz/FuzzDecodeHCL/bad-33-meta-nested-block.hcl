go test fuzz v1
[]byte("job \"web\" {\n  meta {\n    owner = \"team-a\"\n    extra {\n      note = \"no\"\n    }\n  }\n  meta = { other = \"x\" }\n  group \"api\" {\n    task \"server\" {\n      driver = \"exec\"\n      config { command = \"/bin/sleep\" }\n      env = [\"PORT=8080\"]\n    }\n  }\n}\n")
