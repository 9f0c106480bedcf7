go test fuzz v1
[]byte("job \"web\" {\n  type     = \"batch\"\n  priority = 0.5\n\n  group \"api\" {\n    count = 20000\n    update {\n      max_parallel = 1\n    }\n\n    task \"server\" {\n      driver  = \"exec\"\n      comand  = \"/bin/server\"\n      env {\n        PORT = 8080\n      }\n      resources {\n        cpu    = 100\n        memory = -1\n      }\n    }\n  }\n}\n")
