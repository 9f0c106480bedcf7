go test fuzz v1
[]byte("job \"web\" {\n  group = {\n    name = \"api\"\n  }\n  group \"api\" {\n    task \"server\" {\n      driver {\n        name = \"exec\"\n      }\n      config = {\n        command = \"/bin/sleep\"\n      }\n    }\n  }\n}\n")
