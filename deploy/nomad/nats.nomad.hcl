# NATS JetStream cluster of three nodes, one per Nomad client (distinct hosts, host network, static
# ports), each with its own store on a sticky ephemeral disk. The routes come from Nomad's service
# discovery and are reloaded (SIGHUP) as nodes come and go. The services create their streams and the
# model bucket with JS_REPLICAS = 3, so one node can be lost. The same settings as deploy/nats.conf
# (compose). Run: nomad job run deploy/nomad/nats.nomad.hcl

variable "datacenters" {
  type    = list(string)
  default = ["dc1"]
}

variable "nats_image" {
  type    = string
  default = "nats:2.10"
}

job "sloserve-nats" {
  datacenters = var.datacenters
  type        = "service"

  group "nats" {
    count = 3

    constraint {
      operator = "distinct_hosts"
      value    = "true"
    }

    network {
      mode = "host"
      port "client" {
        static = 4222
      }
      port "cluster" {
        static = 6222
      }
      port "monitor" {
        static = 8222
      }
    }

    # The JetStream store stays on the node across restarts and job updates.
    ephemeral_disk {
      sticky  = true
      migrate = true
      size    = 4096
    }

    service {
      name     = "sloserve-nats"
      provider = "nomad"
      port     = "client"
    }

    service {
      name     = "sloserve-nats-cluster"
      provider = "nomad"
      port     = "cluster"
    }

    update {
      max_parallel = 1
      # One node at a time, each healthy (JetStream current with the meta leader) before the next.
      min_healthy_time = "30s"
    }

    task "nats" {
      driver = "docker"

      config {
        image        = var.nats_image
        network_mode = "host"
        args         = ["-c", "/local/nats.conf"]
      }

      template {
        destination   = "local/nats.conf"
        change_mode   = "signal"
        change_signal = "SIGHUP"
        data          = <<-EOF
          server_name: "nats-{{ env "NOMAD_ALLOC_INDEX" }}"
          listen: "0.0.0.0:{{ env "NOMAD_PORT_client" }}"
          http: "0.0.0.0:{{ env "NOMAD_PORT_monitor" }}"
          max_payload: 8388608
          cluster {
            name: "sloserve"
            listen: "0.0.0.0:{{ env "NOMAD_PORT_cluster" }}"
            routes: [
          {{- range nomadService "sloserve-nats-cluster" }}
              "nats-route://{{ .Address }}:{{ .Port }}"
          {{- end }}
            ]
          }
          jetstream {
            store_dir: "{{ env "NOMAD_ALLOC_DIR" }}/data/jetstream"
            max_memory_store: 1073741824
          }
        EOF
      }

      resources {
        cpu    = 500
        memory = 1536
      }

      service {
        name     = "sloserve-nats-health"
        provider = "nomad"
        port     = "monitor"
        check {
          type     = "http"
          path     = "/healthz"
          interval = "10s"
          timeout  = "2s"
        }
      }
    }
  }
}
