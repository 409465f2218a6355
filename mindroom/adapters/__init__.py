"""The owners of third-party SDKs: Matrix (nio), Agno and the model SDKs, embedders."""
