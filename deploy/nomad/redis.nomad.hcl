# Redis, the metadata store (apps, models, variants, profiles, workers), with its append-only file
# (fsync every second) on a sticky ephemeral disk: a restart of the task, or of the job, keeps the
# registry. To keep it through the loss of the node too, replace the disk with a host or CSI volume.
# Run: nomad job run deploy/nomad/redis.nomad.hcl

variable "datacenters" {
  type    = list(string)
  default = ["dc1"]
}

variable "redis_image" {
  type    = string
  default = "redis:7"
}

job "sloserve-redis" {
  datacenters = var.datacenters
  type        = "service"

  group "redis" {
    count = 1

    network {
      port "redis" {
        static = 6379
      }
    }

    ephemeral_disk {
      sticky  = true
      migrate = true
      size    = 2048
    }

    service {
      name     = "sloserve-redis"
      provider = "nomad"
      port     = "redis"
      check {
        type     = "tcp"
        interval = "10s"
        timeout  = "2s"
      }
    }

    task "redis" {
      driver = "docker"

      config {
        image = var.redis_image
        ports = ["redis"]
        args  = ["redis-server", "--appendonly", "yes", "--appendfsync", "everysec", "--dir", "/alloc/data"]
      }

      resources {
        cpu    = 500
        memory = 1024
      }
    }
  }
}
