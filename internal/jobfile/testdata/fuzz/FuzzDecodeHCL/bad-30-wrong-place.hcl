go test fuzz v1
[]byte("job \"web\" {\n  count = 2\n  group \"api\" {\n    driver = \"exec\"\n    task \"server\" {\n      driver = \"exec\"\n      config { command = \"/bin/sleep\" }\n      task \"inner\" {}\n    }\n  }\n}\n")
